#include "pool/prim/fake_vmm.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace vstack::prim {

namespace {
int key(Location l) { return static_cast<int>(l.kind) * 1000 + l.id; }
Status sys_error(const char* what) { return Status(Code::driver_error, std::string(what) + ": " + std::strerror(errno), 999); }
Status invalid(const char* what) { return Status(Code::invalid_value, what, 1); }
}  // namespace

FakeVmm::FakeVmm() = default;

FakeVmm::~FakeVmm() {
  for (auto& [va, r] : res_) ::munmap(reinterpret_cast<void*>(va), r.bytes);
  for (auto& [h, p] : phys_) ::close(p.fd);
}

void FakeVmm::set_capacity(Location loc, uint64_t bytes) {
  std::lock_guard g(mu_);
  cap_[key(loc)] = bytes;
}

uint64_t FakeVmm::used(Location loc) const {
  std::lock_guard g(mu_);
  auto it = used_.find(key(loc));
  return it == used_.end() ? 0 : it->second;
}

size_t FakeVmm::live_handles() const {
  std::lock_guard g(mu_);
  return phys_.size();
}

size_t FakeVmm::live_reservations() const {
  std::lock_guard g(mu_);
  return res_.size();
}

void FakeVmm::hold_events(bool hold) {
  std::lock_guard g(mu_);
  hold_ = hold;
}

void FakeVmm::complete_events() {
  std::lock_guard g(mu_);
  pending_.clear();
}

Status FakeVmm::reserve(uint64_t bytes, uint64_t alignment, DevPtr* va) {
  if (bytes == 0 || bytes % granularity({}) != 0) return invalid("reserve: size not a granule multiple");
  uint64_t align = alignment ? alignment : granularity({});
  // Over-reserve and trim so that the start is aligned.
  void* p = ::mmap(nullptr, bytes + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return sys_error("reserve mmap");
  uintptr_t start = (reinterpret_cast<uintptr_t>(p) + align - 1) & ~(align - 1);
  if (start > reinterpret_cast<uintptr_t>(p)) ::munmap(p, start - reinterpret_cast<uintptr_t>(p));
  uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes + align;
  if (end > start + bytes) ::munmap(reinterpret_cast<void*>(start + bytes), end - (start + bytes));
  std::lock_guard g(mu_);
  res_[start] = Reservation{bytes, {}};
  *va = start;
  return Status::ok();
}

Status FakeVmm::release(DevPtr va, uint64_t bytes) {
  std::lock_guard g(mu_);
  auto it = res_.find(va);
  if (it == res_.end() || it->second.bytes != bytes) return invalid("release: not a reservation");
  if (!it->second.mapped.empty()) return invalid("release: range still mapped");
  ::munmap(reinterpret_cast<void*>(va), bytes);
  res_.erase(it);
  return Status::ok();
}

Status FakeVmm::create(Location loc, uint64_t bytes, Handle* h) {
  std::lock_guard g(mu_);
  if (bytes == 0 || bytes % granularity(loc) != 0) return invalid("create: size not a granule multiple");
  if (fail_creates_ > 0) {
    --fail_creates_;
    return Status(Code::out_of_memory, "create: injected failure", 2);
  }
  auto cap = cap_.find(key(loc));
  uint64_t& used = used_[key(loc)];
  if (cap != cap_.end() && used + bytes > cap->second) return Status(Code::out_of_memory, "create: location full", 2);
  int fd = ::memfd_create("fake_vmm", MFD_CLOEXEC);
  if (fd < 0) return sys_error("memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    ::close(fd);
    return sys_error("ftruncate");
  }
  used += bytes;
  *h = next_handle_++;
  phys_[*h] = Phys{fd, bytes, loc};
  return Status::ok();
}

Status FakeVmm::destroy(Handle h) {
  std::lock_guard g(mu_);
  auto it = phys_.find(h);
  if (it == phys_.end()) return invalid("destroy: unknown handle");
  // Like the driver, memory stays alive while mapped; the fd keeps the pages
  // of existing mappings alive after close(), so closing now is faithful.
  ::close(it->second.fd);
  used_[key(it->second.loc)] -= it->second.bytes;
  phys_.erase(it);
  return Status::ok();
}

FakeVmm::Reservation* FakeVmm::find_reservation(DevPtr va, uint64_t bytes) {
  auto it = res_.upper_bound(va);
  if (it == res_.begin()) return nullptr;
  --it;
  if (va < it->first || va + bytes > it->first + it->second.bytes) return nullptr;
  return &it->second;
}

Status FakeVmm::map(DevPtr va, uint64_t bytes, Handle h) {
  std::lock_guard g(mu_);
  auto ph = phys_.find(h);
  if (ph == phys_.end()) return invalid("map: unknown handle");
  if (bytes != ph->second.bytes) return invalid("map: size differs from the handle's");
  Reservation* r = find_reservation(va, bytes);
  if (!r) return invalid("map: range not reserved");
  for (auto& [mva, mb] : r->mapped)
    if (va < mva + mb && mva < va + bytes) return invalid("map: range already mapped");
  void* p = ::mmap(reinterpret_cast<void*>(va), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                   ph->second.fd, 0);
  if (p == MAP_FAILED) return sys_error("map mmap");
  r->mapped[va] = bytes;
  ++maps_;
  return Status::ok();
}

Status FakeVmm::unmap(DevPtr va, uint64_t bytes) {
  std::lock_guard g(mu_);
  Reservation* r = find_reservation(va, bytes);
  if (!r) return invalid("unmap: range not reserved");
  auto it = r->mapped.find(va);
  if (it == r->mapped.end() || it->second != bytes) return invalid("unmap: not a mapping");
  void* p = ::mmap(reinterpret_cast<void*>(va), bytes, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return sys_error("unmap mmap");
  r->mapped.erase(it);
  return Status::ok();
}

Status FakeVmm::stream_create(Stream* s) {
  std::lock_guard g(mu_);
  *s = reinterpret_cast<Stream>(next_token_++);
  return Status::ok();
}
Status FakeVmm::stream_destroy(Stream) { return Status::ok(); }

Status FakeVmm::event_create(Event* e, bool) {
  std::lock_guard g(mu_);
  *e = reinterpret_cast<Event>(next_token_++);
  events_.insert(*e);
  return Status::ok();
}
Status FakeVmm::event_destroy(Event e) {
  std::lock_guard g(mu_);
  if (!events_.erase(e)) return invalid("event_destroy: unknown event");
  pending_.erase(e);
  return Status::ok();
}
Status FakeVmm::event_record(Event e, Stream) {
  std::lock_guard g(mu_);
  if (!events_.count(e)) return invalid("event_record: unknown event");
  if (hold_) pending_.insert(e);
  return Status::ok();
}
Result<EventState> FakeVmm::event_query(Event e) {
  std::lock_guard g(mu_);
  if (!events_.count(e)) return invalid("event_query: unknown event");
  return pending_.count(e) ? EventState::pending : EventState::done;
}
Status FakeVmm::event_sync(Event e) {
  std::lock_guard g(mu_);
  if (!events_.count(e)) return invalid("event_sync: unknown event");
  if (pending_.erase(e)) ++syncs_;
  return Status::ok();
}
Result<float> FakeVmm::event_elapsed_ms(Event, Event) { return 0.001f; }
Status FakeVmm::stream_wait(Stream, Event e) {
  std::lock_guard g(mu_);
  if (!events_.count(e)) return invalid("stream_wait: unknown event");
  return Status::ok();
}
Status FakeVmm::copy_async(DevPtr dst, DevPtr src, uint64_t bytes, Stream) {
  {
    std::lock_guard g(mu_);
    ++copies_;
  }
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return Status::ok();
}

}  // namespace vstack::prim
