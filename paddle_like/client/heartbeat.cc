#include "paddle_like/client/heartbeat.h"

#include <algorithm>
#include <chrono>

namespace pl {

HeartbeatThread::HeartbeatThread(MasterClient* master, std::function<void(const Status&)> on_error)
    : master_(master), on_error_(std::move(on_error)), thread_([this] { Run(); }) {}

HeartbeatThread::~HeartbeatThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string HeartbeatThread::last_error() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

void HeartbeatThread::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    const auto period = std::chrono::milliseconds(std::max<int64_t>(master_->lease_ms() / 3, 50));
    if (cv_.wait_for(lock, period, [this] { return done_; })) break;
    lock.unlock();
    Status s = master_->Heartbeat(task_id_.load());
    if (!s.ok() && on_error_) on_error_(s);
    lock.lock();
    last_error_ = s.ok() ? "" : std::string(s.message());
  }
}

std::vector<ChunkInfo> ChunksOfTask(const proto::Task& task) {
  std::vector<ChunkInfo> chunks;
  for (const proto::Chunk& c : task.chunks()) {
    ChunkInfo info;
    info.path = c.path();
    info.index = c.index();
    info.offset = c.offset();
    info.length = c.length();
    info.num_records = c.num_records();
    chunks.push_back(std::move(info));
  }
  return chunks;
}

}  // namespace pl
