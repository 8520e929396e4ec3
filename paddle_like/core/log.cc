#include "paddle_like/core/log.h"

#include <errno.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace pl::log {
namespace {

absl::Mutex g_name_mu;
std::string* g_name ABSL_GUARDED_BY(g_name_mu) = nullptr;

const char* LevelName(Level level) {
  switch (level) {
    case Level::kInfo:
      return "INFO";
    case Level::kWarning:
      return "WARNING";
    case Level::kError:
      return "ERROR";
  }
  return "?";
}

// One write(2) per line, retried on a short write or EINTR: concurrent lines stay whole.
void WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere left to report a failing log stream
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void SetProcessName(std::string name) {
  absl::MutexLock lock(&g_name_mu);
  if (g_name == nullptr) g_name = new std::string();  // never freed: logging may outlive statics
  *g_name = std::move(name);
}

std::string ProcessName() {
  absl::MutexLock lock(&g_name_mu);
  if (g_name != nullptr) return *g_name;
  return program_invocation_short_name;
}

std::string FormatLine(absl::Time when, Level level, absl::string_view process, absl::string_view text) {
  absl::string_view body = text;
  while (!body.empty() && body.back() == '\n') body.remove_suffix(1);
  return absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", when, absl::UTCTimeZone()), " ", LevelName(level),
                      " ", process, ": ", body, "\n");
}

void Write(Level level, absl::string_view text) {
  const std::string line = FormatLine(absl::Now(), level, ProcessName(), text);
  WriteAll(level == Level::kInfo ? STDOUT_FILENO : STDERR_FILENO, line);
}

LineStream::LineStream(Level level) : std::ostream(nullptr), buffer_(level) { rdbuf(&buffer_); }

LineStream::~LineStream() { flush(); }

LineStream::Buffer::~Buffer() {
  if (!line_.empty()) Write(level_, line_);
}

LineStream::Buffer::int_type LineStream::Buffer::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  if (c == '\n') {
    Write(level_, line_);
    line_.clear();
  } else {
    line_.push_back(static_cast<char>(c));
  }
  return c;
}

}  // namespace pl::log
