// prim::Vmm on host memory, for CPU tests of the pool and the tiers.
// Physical handles are memfds; reserve() is PROT_NONE address space and map()
// is mmap(MAP_FIXED|MAP_SHARED) of the memfd, so an access through a wrong or
// missing mapping faults like it would on a GPU, and two mappings of one
// handle alias. Copies run synchronously. Events complete at once unless
// hold_events(true), in which case they stay pending until complete_events()
// or event_sync(): that lets tests check that the pool waits for last use.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>

#include "pool/prim/vmm.hpp"

namespace vstack::prim {

class FakeVmm final : public Vmm {
 public:
  FakeVmm();
  ~FakeVmm() override;

  // Limits and fault injection.
  void set_capacity(Location loc, uint64_t bytes);
  uint64_t used(Location loc) const;
  void fail_next_create(int n = 1) { fail_creates_ = n; }
  void hold_events(bool hold);
  void complete_events();
  uint64_t maps() const { return maps_; }
  uint64_t copies() const { return copies_; }
  uint64_t syncs() const { return syncs_; }  // event_sync calls on pending events
  size_t live_handles() const;
  size_t live_reservations() const;

  uint64_t granularity(Location) override { return 2ull << 20; }
  Status reserve(uint64_t bytes, uint64_t alignment, DevPtr* va) override;
  Status release(DevPtr va, uint64_t bytes) override;
  Status create(Location loc, uint64_t bytes, Handle* h) override;
  Status destroy(Handle h) override;
  Status map(DevPtr va, uint64_t bytes, Handle h) override;
  Status unmap(DevPtr va, uint64_t bytes) override;
  Status stream_create(Stream* s) override;
  Status stream_destroy(Stream s) override;
  Status event_create(Event* e, bool timing) override;
  Status event_destroy(Event e) override;
  Status event_record(Event e, Stream s) override;
  Result<EventState> event_query(Event e) override;
  Status event_sync(Event e) override;
  Result<float> event_elapsed_ms(Event a, Event b) override;
  Status stream_wait(Stream s, Event e) override;
  Status copy_async(DevPtr dst, DevPtr src, uint64_t bytes, Stream s) override;

 private:
  struct Phys {
    int fd;
    uint64_t bytes;
    Location loc;
  };
  struct Reservation {
    uint64_t bytes;
    std::map<DevPtr, uint64_t> mapped;  // va -> bytes
  };
  Reservation* find_reservation(DevPtr va, uint64_t bytes);

  mutable std::mutex mu_;
  std::map<Handle, Phys> phys_;
  std::map<DevPtr, Reservation> res_;
  std::map<int, uint64_t> cap_, used_;  // key: kind * 1000 + id
  std::set<Event> pending_;
  std::set<Event> events_;
  bool hold_ = false;
  int fail_creates_ = 0;
  Handle next_handle_ = 1;
  uint64_t maps_ = 0, copies_ = 0, syncs_ = 0;
  uintptr_t next_token_ = 0x1000;
};

}  // namespace vstack::prim
