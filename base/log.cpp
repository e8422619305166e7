#include "base/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>

namespace vstack::log {

spdlog::logger& get() {
  // Leaked on purpose: the shim logs from atexit handlers and signal-driven
  // threads that may outlive static destructors.
  static spdlog::logger* logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* l = new spdlog::logger("vstack", std::move(sink));
    l->set_pattern("[vstack %L %P] %v");
    l->set_level(spdlog::level::warn);
    l->flush_on(spdlog::level::warn);
    return l;
  }();
  return *logger;
}

bool set_level(const char* name) {
  auto lvl = spdlog::level::from_str(name);
  if (lvl == spdlog::level::off && std::string_view(name) != "off") return false;
  get().set_level(lvl);
  return true;
}

}  // namespace vstack::log
