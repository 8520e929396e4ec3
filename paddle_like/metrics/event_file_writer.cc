#include "paddle_like/metrics/event_file_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_format.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/io/crc32c.h"
#include "paddle_like/metrics/summary_histogram.h"

namespace pl::metrics {
namespace {

constexpr size_t kBufferLimit = 64 << 10;
std::atomic<int> g_file_counter{0};

void AppendLE32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}

double WallTime(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

}  // namespace

std::string FrameRecord(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  char len[8];
  const uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(n >> (8 * i));
  out.append(len, 8);
  AppendLE32(&out, MaskCrc(Crc32c(len, 8)));
  out.append(data);
  AppendLE32(&out, MaskCrc(Crc32c(data.data(), data.size())));
  return out;
}

StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Open(const std::string& dir, EventFileOptions options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus("cannot create the log directory", dir, ec.value());
  if (options.hostname.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
    options.hostname = host;
  }
  const std::string path =
      absl::StrFormat("%s/events.out.tfevents.%010d.%s.%d.%d", dir, absl::ToUnixSeconds(absl::Now()),
                      options.hostname, ::getpid(), g_file_counter.fetch_add(1));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_APPEND, 0644);
  if (fd < 0) return ErrnoStatus("cannot create the event file", path, errno);
  std::unique_ptr<EventFileWriter> w(new EventFileWriter(path, fd, std::move(options)));
  proto::tb::Event version;
  version.set_file_version("brain.Event:2");
  PL_RETURN_IF_ERROR(w->AddEvent(std::move(version)));
  // The version record goes out at once: a file TensorBoard lists is never empty.
  PL_RETURN_IF_ERROR(w->Flush());
  return w;
}

EventFileWriter::EventFileWriter(std::string path, int fd, EventFileOptions options)
    : path_(std::move(path)), options_(std::move(options)), fd_(fd), last_flush_(absl::Now()) {}

EventFileWriter::~EventFileWriter() { (void)Close(); }

Status EventFileWriter::AddScalar(const std::string& tag, double value, int64_t step) {
  return AddScalars(step, {{tag, value}});
}

Status EventFileWriter::AddScalars(int64_t step, const std::vector<Scalar>& scalars) {
  proto::tb::Event event;
  event.set_step(step);
  for (const Scalar& s : scalars) {
    proto::tb::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(s.tag);
    v->set_simple_value(static_cast<float>(s.value));
  }
  return AddEvent(std::move(event));
}

Status EventFileWriter::AddHistogram(const std::string& tag, absl::Span<const double> values, int64_t step) {
  proto::tb::Event event;
  event.set_step(step);
  proto::tb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  *v->mutable_histo() = BuildHistogram(values);
  return AddEvent(std::move(event));
}

Status EventFileWriter::AddEvent(proto::tb::Event event) {
  const absl::Time now = absl::Now();
  if (event.wall_time() == 0) event.set_wall_time(WallTime(now));
  absl::MutexLock lock(&mu_);
  PL_RETURN_IF_ERROR(AppendLocked(event));
  if (buffer_.size() >= kBufferLimit || now - last_flush_ >= options_.flush_every) return FlushLocked();
  return absl::OkStatus();
}

Status EventFileWriter::AppendLocked(const proto::tb::Event& event) {
  if (!error_.ok()) return error_;
  if (fd_ < 0) return absl::FailedPreconditionError(absl::StrCat("event file '", path_, "' is closed"));
  const std::string framed = FrameRecord(event.SerializeAsString());
  buffer_.append(framed);
  bytes_ += framed.size();
  return absl::OkStatus();
}

Status EventFileWriter::FlushLocked() {
  if (!error_.ok()) return error_;
  last_flush_ = absl::Now();
  size_t done = 0;
  while (done < buffer_.size() && fd_ >= 0) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = ErrnoStatus("cannot write the event file", path_, n < 0 ? errno : EIO);
      return error_;
    }
    done += n;
  }
  buffer_.clear();
  return absl::OkStatus();
}

Status EventFileWriter::Flush() {
  absl::MutexLock lock(&mu_);
  return FlushLocked();
}

Status EventFileWriter::Close() {
  absl::MutexLock lock(&mu_);
  if (fd_ < 0) return error_;
  Status st = FlushLocked();
  if (::close(fd_) != 0 && st.ok()) st = ErrnoStatus("cannot close the event file", path_, errno);
  fd_ = -1;
  if (!st.ok() && error_.ok()) error_ = st;
  return st;
}

int64_t EventFileWriter::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace pl::metrics
