// HeartbeatThread: renews a trainer's lease, and that of the task it holds, every
// lease/3 on a thread of its own until destroyed, so a long step never costs the
// trainer its lease. Also ChunksOfTask: the record chunks a leased task names.
//
// Thread-safety: set_task and last_error may be called from any thread.
#ifndef PADDLE_LIKE_CLIENT_HEARTBEAT_H_
#define PADDLE_LIKE_CLIENT_HEARTBEAT_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "paddle_like/data/chunk_index.h"
#include "paddle_like/client/master_client.h"

namespace pl {

class HeartbeatThread {
 public:
  // `on_error` (optional) hears about each failed heartbeat, from the thread.
  explicit HeartbeatThread(MasterClient* master,
                           std::function<void(const Status&)> on_error = nullptr);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

  // The task whose lease to renew too (0: none).
  void set_task(int64_t id) { task_id_.store(id); }
  // The message of the last heartbeat if it failed, else "".
  std::string last_error();

 private:
  void Run();

  MasterClient* master_;
  std::function<void(const Status&)> on_error_;
  std::atomic<int64_t> task_id_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string last_error_;
  std::thread thread_;  // last: starts after the members it uses
};

std::vector<ChunkInfo> ChunksOfTask(const proto::Task& task);

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_HEARTBEAT_H_
