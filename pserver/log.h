// One line per notable event on stderr, prefixed with a UTC timestamp and the
// process's role, e.g. "2024-05-01T12:00:00.123Z pserver 0: checkpoint written ...".
// Thread-safety: thread-safe (each line is written with one call).
#ifndef PSERVER_LOG_H_
#define PSERVER_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace pl::pserver {

inline void LogEvent(const std::string& line) {
  const std::string text = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), " ", line, "\n");
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace pl::pserver

#endif  // PSERVER_LOG_H_
