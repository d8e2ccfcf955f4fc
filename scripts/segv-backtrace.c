// A host backtrace where a process dies of SIGSEGV or SIGBUS, for a crash seen only under a tool.
// Written for v41's exit of FusedFirstRadixPassIsTheSamePlan under compute-sanitizer's racecheck
// (exit status 11, no gtest text). In v42 the same test ran to completion under racecheck (153 s,
// 0 hazards), and six pieces with this preloaded ran 19-115 s into it with no fault: the exit was
// not reproduced and its cause is unknown (docs/results/h200-v42-checks.txt). Kept for the next
// such crash: scripts/racecheck-pieces.sh preloads it with SEGV=1. Preloaded into the test, it
// prints the signal, the fault address, the frames, and the executable mappings and the stack's, so
// the frames say whether the fault lies in our code (test_cuda_aggregate, libpipelink) or the tool's
// (libsanitizer*, libTreeLauncher*, libcuda), and the fault address whether a stack overflowed.
//   gcc -shared -fPIC -o /tmp/segv.so scripts/segv-backtrace.c
//   LD_PRELOAD=/tmp/segv.so compute-sanitizer --tool racecheck build/gpu/tests/test_cuda_aggregate ...
// Symbols: backtrace_symbols_fd names exported functions only; addr2line on the printed offsets
// against the mapped files gives the rest.
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  char m[128];
  const int n = snprintf(m, sizeof m, "\n### signal %d at address %p, pid %d\n", sig, si->si_addr, (int)getpid());
  (void)!write(2, m, (size_t)n);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), 2);
  FILE* f = fopen("/proc/self/maps", "r");  // not async-signal-safe; the process is ending anyway
  char line[512];
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "r-xp") || strstr(line, "[stack")) (void)!write(2, line, strlen(line));
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  static char alt[1 << 16];  // the handler's own stack, so that a stack overflow still reports
  stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
  sigaltstack(&ss, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, 0);
  sigaction(SIGBUS, &sa, 0);
}
