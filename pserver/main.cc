// pl-pserver: one parameter server process (pserver/pserver_main.h has its flags,
// pserver/service/pserver_process.h what it does).
//
//   pl-pserver --index 0 --num_pservers 2 --master 127.0.0.1:7000 --port 0
//              --port_file /tmp/ps0.port --checkpoint_dir /tmp/ckpt --checkpoint_every_s 10
#include "paddle_like/core/runtime.h"
#include "pserver/pserver_main.h"

int main(int argc, char** argv) {
  pl::KeepLargeBuffersInHeap();
  pl::SkipMutexDeadlockChecks();
  return pl::pserver::PserverMain(argc, argv, pl::pserver::Env::Default());
}
