// The decode regime's launcher (M <= 16): which kernel takes a matmul (quant/gemv_plan.hpp's plans).
#pragma once

#include "quant/gemv_ring.cuh"
#include "quant/gemv_ring_wide.cuh"

namespace vstack::quant {

// VSTACK_GEMV_RING_WIDE=0: never the wide kernel (Note [Wide row blocks]; benchmarks and tests); unset or
// 1: wherever an instance applies.
inline int forced_gemv_ring_wide() {
  static const int v = env_flag("VSTACK_GEMV_RING_WIDE");
  return v;
}

// VSTACK_GEMV_PACK=0: the wide kernel never packs its columns (Note [Packed columns]; benchmarks and tests);
// unset or 1: where wide_pack says.
inline int forced_gemv_pack() {
  static const int v = env_flag("VSTACK_GEMV_PACK");
  return v;
}

// The ring kernel where gemv_ring_mode says so (the wide kernel where ring_wide_tiles does, unless a
// G is forced), else the register-load kernel's plans.
template <Format F, typename T>
cudaError_t launch_decode(const GemmParams& p, cudaStream_t stream) {
#if defined(VSTACK_WGMMA)
  // a forced plan of the register-load kernel (VSTACK_GEMV_SPLIT / _TILES / _WS) is that kernel's
  const int forced = forced_gemv_ring() >= 0 ? forced_gemv_ring()
                     : forced_gemv_split() > 0 || forced_gemv_tiles() > 0 || forced_gemv_ws() >= 0 ? 0 : -1;
  const bool has_ring = kernels::has_sm90_features(p.cc) && p.smem_optin >= kRingSmem;
  const int g = gemv_ring_mode(p.m, p.n, p.k, F, has_ring, forced, p.sms, forced_gemv_ring_groups());
  if (g == kRingNone) return forced == 1 && !has_ring ? cudaErrorNotSupported : launch_gemv<F, T>(p, stream);
  const int gx = forced_gemv_ring_groups() > 0 ? 0 : ring_wide_tiles(p.m, p.n, p.k, F, p.sms, forced_gemv_ring_wide());
  // the instance, picked once: checked, then launched (with 1, an error where this device cannot run it)
  auto run = [&]<int MT, bool PK = false>() {
    if (!kernels::tensor_map_encoder()) return forced == 1 ? cudaErrorNotSupported : launch_gemv<F, T>(p, stream);
    using Wide = WideInstance<F, T, MT, PK>;
    if (gx > 0 && Wide::usable(gx)) return Wide::launch(p, gx, stream);
    if (gx > 0 && forced_gemv_ring_wide() == 1) return cudaErrorNotSupported;
    if (!ring_fits<fp4_gemv_ring_kernel<F, T, MT>>())
      return forced == 1 ? cudaErrorNotSupported : launch_gemv<F, T>(p, stream);
    return launch_gemv_ring<F, T, MT>(p, ring_layout(p.m, chunk_scale_bytes(F), g), stream);
  };
  if (p.m > 8) return run.template operator()<2>();
  if constexpr (chunk_groups(F) > 1)  // packed columns: only the formats with several scale groups a chunk
    if (gx > 0 && forced_gemv_pack() != 0 && wide_pack(F, p.m))
      return run.template operator()<1, true>();
  return run.template operator()<1>();
#else
  return launch_gemv<F, T>(p, stream);
#endif
}

}  // namespace vstack::quant
