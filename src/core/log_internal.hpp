#pragma once
// Internal logging: fmt-formatted, filtered by PIPELINK_LOG_LEVEL before any formatting happens.
#include <fmt/format.h>

#include <string>

#include "pipelink/debug.hpp"

namespace pipelink::detail {
void log_message(LogLevel level, const std::string& msg);
}

#define PIPELINK_LOG(level, ...)                                                     \
  do {                                                                               \
    if (::pipelink::log_level() <= (level))                                          \
      ::pipelink::detail::log_message((level), ::fmt::format(__VA_ARGS__));          \
  } while (false)
#define PIPELINK_LOG_TRACE(...) PIPELINK_LOG(::pipelink::LogLevel::trace, __VA_ARGS__)
#define PIPELINK_LOG_DEBUG(...) PIPELINK_LOG(::pipelink::LogLevel::debug, __VA_ARGS__)
#define PIPELINK_LOG_INFO(...) PIPELINK_LOG(::pipelink::LogLevel::info, __VA_ARGS__)
#define PIPELINK_LOG_WARN(...) PIPELINK_LOG(::pipelink::LogLevel::warn, __VA_ARGS__)
#define PIPELINK_LOG_ERROR(...) PIPELINK_LOG(::pipelink::LogLevel::error, __VA_ARGS__)
