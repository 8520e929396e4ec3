// PserverMain: pl-pserver's command line (its flags, their environment fallbacks and
// checks) over PserverProcess, with SIGTERM/SIGINT as the stop. pserver/main.cc runs it
// with the real Env; a test's own binary may run it with an Env that injects faults
// (tests/pserver/faulty_pserver_main.cc), so both take exactly the same flags.
//
// Thread-safety: call once, from main.
#ifndef PSERVER_PSERVER_MAIN_H_
#define PSERVER_PSERVER_MAIN_H_

#include "pserver/service/pserver_env.h"

namespace pl::pserver {

// Parses the flags (a bad one exits 2 with the usage line), runs the process until a
// signal, and returns the exit status: 0 after a clean stop, 1 with a one-line cause on
// stderr otherwise. `env` must outlive the call.
int PserverMain(int argc, char** argv, Env* env);

}  // namespace pl::pserver

#endif  // PSERVER_PSERVER_MAIN_H_
