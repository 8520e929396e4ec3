#include "master/durable_replies.h"

#include <utility>

namespace pl {

DurableReplies::DurableReplies(std::function<Status(int64_t ticket)> durable)
    : durable_(std::move(durable)), thread_([this] { Loop(); }) {}

DurableReplies::~DurableReplies() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  added_.notify_one();
  thread_.join();
}

void DurableReplies::Add(int64_t ticket, std::function<void(const Status& stored)> reply) {
  if (ticket < 0) {
    reply(absl::OkStatus());
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back({ticket, std::move(reply)});
  }
  added_.notify_one();
}

void DurableReplies::Loop() {
  std::vector<Waiting> batch;
  while (true) {
    {
      std::unique_lock<std::mutex> l(mu_);
      added_.wait(l, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      batch.swap(queue_);
    }
    // The first wait covers the batch (a log's records are durable in order); the
    // others return at once, or wait for what was written after it.
    for (Waiting& w : batch) w.reply(durable_(w.ticket));
    batch.clear();
  }
}

}  // namespace pl
