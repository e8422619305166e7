// The vstack configuration: one struct, read once, validated in one place.
// The shim, vstack-run and vstack-plan all go through load_config()/parse_config();
// every error names the JSON path, what was expected and what was found,
// e.g.  "tiers.json: $.tiers[1].capacity_gb: expected a number > 0 or \"auto\", found \"lots\"".
// The schema is documented in configs/SCHEMA.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace vstack {

inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;

enum class TierKind : uint8_t { gpu, peer, host, nvme };
const char* tier_kind_name(TierKind k);

struct TierConfig {
  TierKind kind = TierKind::gpu;
  int device = 0;          // gpu, peer: CUDA device ordinal
  int numa_node = 0;       // host: NUMA node of the HOST_NUMA chunks
  std::string path;        // nvme: directory for the backing file
  // Capacity in bytes. 0 with capacity_auto = decided at init (gpu: free memory
  // minus gpu_reserve; host: host_share of RAM).
  uint64_t capacity_bytes = 0;
  bool capacity_auto = false;
};

// What a rule does to the allocations it matches.
enum class RuleAction : uint8_t {
  passthrough,  // served by the real cuMemAlloc, never paged (still counted against the GPU tier)
  pin_gpu,      // paged allocation whose pages never leave the GPU tier
  opaque,       // paged, but may be used through pointers the scan cannot see:
                // moved only when the device is quiescent, never to nvme
};
const char* rule_action_name(RuleAction a);

// A rule matches an allocation when every given field matches.
struct Rule {
  std::optional<uint64_t> min_bytes;  // size >= min_bytes
  std::optional<uint64_t> max_bytes;  // size <= max_bytes
  std::optional<bool> ipc;            // from a memory pool created with IPC handle types
  RuleAction action = RuleAction::passthrough;
  std::string json_path;              // "$.rules[2]", named in errors and logs
};

struct StatsConfig {
  int signal = 10;                           // SIGUSR1 on Linux; 0 = no signal handler ("off")
  std::string path = "/tmp/vstack-%p.json";  // %p = pid
  double interval_s = 0;                     // > 0: also dump periodically
};

struct Config {
  uint64_t page_bytes = 32 * kMiB;      // "page_mb"; a multiple of the 2 MiB granule
  std::vector<TierConfig> tiers;        // ordered fastest first; exactly one gpu tier, first
  std::string eviction = "lru";         // "policy.eviction"
  bool overcommit = false;              // "policy.overcommit": allocations beyond all tiers
  uint64_t gpu_reserve_bytes = 2 * kGiB;  // "gpu_reserve_gb": left to the context, cuBLAS, NCCL...
  double host_share = 0.5;              // default host tier = host_share × MemTotal
  std::vector<Rule> rules;
  StatsConfig stats;
  std::string log_level = "warn";
  std::string source = "<embedded default>";  // file the config came from
};

// Parse and validate a JSON document. `source` is used in error messages.
Result<Config> parse_config(std::string_view json_text, std::string_view source);
// Read the file and parse it.
Result<Config> load_config(const std::string& path);
// The embedded default: gpu tier (auto) + host tier (auto).
Config default_config();
// The config the process should use: $VSTACK_CONFIG if set, else the default;
// then $VSTACK_LOG overrides log.level and $VSTACK_STATS_PATH overrides
// stats.path (both validated like the JSON fields). This is the only place
// that reads these variables.
Result<Config> config_from_environment();

// Checks that touch the filesystem, kept out of parse_config so that parsing
// has no side effects: every nvme tier's path is a writable directory and the
// directory of stats.path exists and is writable. vstack-run calls it before
// starting the job.
Status check_config_paths(const Config& c);

// The first rule that matches, or nullptr.
const Rule* match_rule(const Config& c, uint64_t bytes, bool ipc);

}  // namespace vstack
