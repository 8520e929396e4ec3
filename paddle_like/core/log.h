// The one log format of every paddle_like process: one line per event,
//
//   2026-11-24T06:40:00.123Z INFO pserver-1: checkpoint 12 written (3.1 MB)
//
// a UTC timestamp (milliseconds), the level, the process's name and the text. INFO lines
// go to stdout; WARNING and ERROR lines to stderr, so a supervisor that keeps only
// stderr still sees every problem. `main` names the process once (SetProcessName); the
// libraries only call Info/Warning/Error, or take a LogFn so a test can capture lines.
//
// Thread-safety: thread-safe. Each line is written with one write(2) call, so lines from
// concurrent threads never interleave; SetProcessName may race only with itself.
#ifndef PADDLE_LIKE_CORE_LOG_H_
#define PADDLE_LIKE_CORE_LOG_H_

#include <functional>
#include <ostream>
#include <streambuf>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pl::log {

enum class Level { kInfo, kWarning, kError };

// A sink for one event's text (no timestamp, no newline), e.g. pl::log::Info.
using LogFn = std::function<void(const std::string&)>;

// "master", "pserver-1", "trainer-3". Until set: the program's file name.
void SetProcessName(std::string name);
std::string ProcessName();

// "2026-11-24T06:40:00.123Z INFO trainer-3: text\n" (a multi-line text is kept whole).
std::string FormatLine(absl::Time when, Level level, absl::string_view process, absl::string_view text);

void Write(Level level, absl::string_view text);
inline void Info(const std::string& text) { Write(Level::kInfo, text); }
inline void Warning(const std::string& text) { Write(Level::kWarning, text); }
inline void Error(const std::string& text) { Write(Level::kError, text); }

// An std::ostream for libraries that take a log stream (the training loops): each line
// written to it, once its '\n' arrives, becomes one log line at `level`; a partial line
// is written when the stream is destroyed. Thread-safety: one thread per LineStream.
class LineStream : public std::ostream {
 public:
  explicit LineStream(Level level = Level::kInfo);
  ~LineStream() override;

 private:
  class Buffer : public std::streambuf {
   public:
    explicit Buffer(Level level) : level_(level) {}
    ~Buffer() override;

   protected:
    int_type overflow(int_type c) override;

   private:
    Level level_;
    std::string line_;
  };
  Buffer buffer_;
};

}  // namespace pl::log

#endif  // PADDLE_LIKE_CORE_LOG_H_
