/* A harmless stand-in for libvstack.so in the vstack-run tests: when preloaded
 * it only proves that it was loaded, by creating the file named in
 * $VSTACK_FAKE_PRELOAD_MARK. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void vstack_fake_preload_loaded(void) {
  const char* mark = getenv("VSTACK_FAKE_PRELOAD_MARK");
  if (mark == NULL || *mark == '\0') return;
  int fd = open(mark, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}
