#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "core/log_internal.hpp"

namespace pipelink {

namespace {
LogLevel level_from_env() noexcept {
  const char* env = std::getenv("PIPELINK_LOG_LEVEL");
  if (!env || !*env) return LogLevel::warn;
  try {
    return parse_log_level(env);
  } catch (const std::exception&) {
    std::fprintf(stderr, "pipelink: ignoring PIPELINK_LOG_LEVEL='%s' (use trace|debug|info|warn|error|off)\n", env);
    return LogLevel::warn;
  }
}
std::atomic<LogLevel>& level_ref() noexcept {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}
spdlog::logger& logger() {
  // stderr so that CLI output on stdout (tables, JSON) stays machine-readable.
  static auto l = [] {
    auto lg = spdlog::stderr_color_mt("pipelink");
    lg->set_pattern("[pipelink %^%l%$] %v");
    lg->set_level(spdlog::level::trace);
    return lg;
  }();
  return *l;
}
}  // namespace

LogLevel log_level() noexcept { return level_ref().load(std::memory_order_relaxed); }
void set_log_level(LogLevel level) noexcept { level_ref().store(level, std::memory_order_relaxed); }

LogLevel parse_log_level(std::string_view name) {
  static constexpr std::pair<std::string_view, LogLevel> names[] = {
      {"trace", LogLevel::trace}, {"debug", LogLevel::debug}, {"info", LogLevel::info},
      {"warn", LogLevel::warn},   {"warning", LogLevel::warn}, {"error", LogLevel::error},
      {"off", LogLevel::off}};
  for (auto [n, l] : names)
    if (n == name) return l;
  throw std::invalid_argument("unknown log level '" + std::string(name) + "': use trace|debug|info|warn|error|off");
}

namespace detail {
void log_message(LogLevel level, const std::string& msg) {
  static constexpr spdlog::level::level_enum map[] = {spdlog::level::trace, spdlog::level::debug,
                                                      spdlog::level::info,  spdlog::level::warn,
                                                      spdlog::level::err,   spdlog::level::off};
  logger().log(map[int(level)], msg);
}
}  // namespace detail

}  // namespace pipelink
