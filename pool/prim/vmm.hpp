// The one boundary between vstack and the CUDA driver's memory and stream
// machinery. Only cuda_vmm.cpp calls cuMem*/cuEvent*/cuStream* for the pool;
// fake_vmm.cpp implements the same interface on host memory for CPU tests.
//
// Addresses are device virtual addresses (CUdeviceptr values). Every call is
// made in the pool's context; every method returns a Status, never throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.hpp"

namespace vstack::prim {

using DevPtr = uint64_t;
using Handle = uint64_t;  // CUmemGenericAllocationHandle
using Stream = void*;     // CUstream
using Event = void*;      // CUevent

enum class LocKind : uint8_t { device, host_numa };

struct Location {
  LocKind kind = LocKind::device;
  int id = 0;  // device ordinal or NUMA node
  bool operator==(const Location&) const = default;
};

enum class EventState : uint8_t { done, pending };

class Vmm {
 public:
  virtual ~Vmm() = default;

  // Granularity of cuMemCreate/cuMemMap for that location (2 MiB on H100/H200).
  virtual uint64_t granularity(Location loc) = 0;

  // Address space.
  virtual Status reserve(uint64_t bytes, uint64_t alignment, DevPtr* va) = 0;
  virtual Status release(DevPtr va, uint64_t bytes) = 0;

  // Physical memory. create() fails with Code::out_of_memory when the location is full.
  virtual Status create(Location loc, uint64_t bytes, Handle* h) = 0;
  virtual Status destroy(Handle h) = 0;

  // map() maps h at va and grants read/write access to the compute device;
  // unmap() removes the mapping (it does NOT wait for work using the range).
  virtual Status map(DevPtr va, uint64_t bytes, Handle h) = 0;
  virtual Status unmap(DevPtr va, uint64_t bytes) = 0;

  // Streams and events (events without timing unless `timing`).
  virtual Status stream_create(Stream* s) = 0;
  virtual Status stream_destroy(Stream s) = 0;
  virtual Status event_create(Event* e, bool timing) = 0;
  virtual Status event_destroy(Event e) = 0;
  virtual Status event_record(Event e, Stream s) = 0;
  virtual Result<EventState> event_query(Event e) = 0;
  virtual Status event_sync(Event e) = 0;
  virtual Result<float> event_elapsed_ms(Event start, Event end) = 0;
  virtual Status stream_wait(Stream s, Event e) = 0;

  // Device-to-device copy on a stream (both sides are device VAs).
  virtual Status copy_async(DevPtr dst, DevPtr src, uint64_t bytes, Stream s) = 0;
};

}  // namespace vstack::prim
