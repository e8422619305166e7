// What this build of the kernels can run, for host code deciding what to launch. The meson option
// `sm` picks one target: 90a (Hopper: wgmma, TMA, clusters) or an older one such as 80, whose builds
// also embed PTX that the driver compiles for newer GPUs. An sm_80 build on an H100 therefore runs
// kernels whose sm_90 code (cluster sums, TMA, wgmma) was compiled out: the device's compute
// capability alone would promise features the kernels do not have, so every such choice asks both.
#pragma once

namespace vstack::kernels {

#if defined(VSTACK_SM)
inline constexpr int kBuiltSm = VSTACK_SM;  // 90 for sm_90a, 80 for sm_80, ...
#else
inline constexpr int kBuiltSm = 0;  // host-only code (CPU tests): no GPU features
#endif
#if defined(VSTACK_WGMMA)
inline constexpr bool kBuiltSm90a = true;  // wgmma and the other sm_90a-only instructions
#else
inline constexpr bool kBuiltSm90a = false;
#endif

// Thread-block clusters, programmatic dependent launch, TMA and bulk copies: sm_90 builds on cc >= 9.0.
constexpr bool has_sm90_features(int cc) { return kBuiltSm >= 90 && cc >= 90; }
// wgmma: sm_90a code, which runs on cc 9.0 only.
constexpr bool has_wgmma(int cc) { return kBuiltSm90a && cc == 90; }

}  // namespace vstack::kernels
