/* A minimal NORM (RFC 5740) file sender and receiver on the Debian NORM
 * library (apt-get install libnorm-dev), for the side-by-side benchmarks
 * in tests/netlab-peer.sh. It is the peer a NORM user would build: one
 * file object, NACK-based repair (or silent receivers and proactive
 * parity only, for push), Reed-Solomon blocks, a fixed rate.
 *
 *   c++ -O2 -o normcast tests/lab/normcast.cpp -lnorm  (normApi.h is C++)
 *   normcast send GROUP PORT IFACE FILE RATE_BPS SEGMENT K PARITY AUTO
 *   normcast recv GROUP PORT IFACE OUTDIR [silent]
 *
 * The sender sends FILE once (plus repairs as receivers NACK for them)
 * and keeps answering NACKs until it is killed. The receiver writes the
 * file into OUTDIR under its sender's name, prints "completed SECONDS"
 * (the wall clock, CLOCK_REALTIME) when it is whole and exits 0; it exits
 * 1 if NORM aborts the object.
 */
#include <normApi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static NormSessionHandle session_on(NormInstanceHandle inst, const char *group,
                                    int port, const char *iface) {
  NormSessionHandle s = NormCreateSession(inst, group, (UINT16)port, NORM_NODE_ANY);
  if (s == NORM_SESSION_INVALID) {
    fprintf(stderr, "normcast: cannot create a session on %s:%d\n", group, port);
    exit(2);
  }
  NormSetRxPortReuse(s, true, NULL, NULL, 0);
  NormSetMulticastInterface(s, iface);
  NormSetMulticastLoopback(s, false);
  /* A LAN: start from a 1 ms round trip rather than NORM's 0.5 s. */
  NormSetGrttEstimate(s, 0.001);
  return s;
}

static int send_file(NormInstanceHandle inst, char **a) {
  NormSessionHandle s = session_on(inst, a[0], atoi(a[1]), a[2]);
  const char *path = a[3];
  const char *name = strrchr(path, '/');
  name = name ? name + 1 : path;
  NormSetTxRate(s, atof(a[4]));
  NormSetTxSocketBuffer(s, 4 << 20);
  int segment = atoi(a[5]), k = atoi(a[6]), parity = atoi(a[7]), autop = atoi(a[8]);
  if (!NormStartSender(s, NormGetRandomSessionId(), 256u << 20, (UINT16)segment,
                       (UINT16)k, (UINT16)parity, 0)) {
    fprintf(stderr, "normcast: cannot start the sender\n");
    return 2;
  }
  NormSetAutoParity(s, (unsigned char)autop);
  if (NormFileEnqueue(s, path, name, (unsigned)strlen(name)) == NORM_OBJECT_INVALID) {
    fprintf(stderr, "normcast: cannot enqueue %s\n", path);
    return 2;
  }
  fprintf(stderr, "normcast: sending %s at %s bit/s\n", path, a[4]);
  NormEvent ev;
  while (NormGetNextEvent(inst, &ev, true)) {
    if (ev.type == NORM_TX_FLUSH_COMPLETED)
      fprintf(stderr, "normcast: flush completed at %.6f\n", wall());
  }
  return 0;
}

static int receive(NormInstanceHandle inst, char **a, int silent) {
  NormSessionHandle s = session_on(inst, a[0], atoi(a[1]), a[2]);
  const char *out = a[3];
  if (!NormSetCacheDirectory(inst, out)) {
    fprintf(stderr, "normcast: cannot use %s\n", out);
    return 2;
  }
  if (silent) NormSetSilentReceiver(s, true, -1);
  if (!NormStartReceiver(s, 256u << 20)) {
    fprintf(stderr, "normcast: cannot start the receiver\n");
    return 2;
  }
  NormSetRxSocketBuffer(s, 16 << 20);
  NormEvent ev;
  while (NormGetNextEvent(inst, &ev, true)) {
    if (ev.type == NORM_RX_OBJECT_INFO && NormObjectGetType(ev.object) == NORM_OBJECT_FILE) {
      char info[256], path[1024];
      unsigned n = NormObjectGetInfo(ev.object, info, sizeof info - 1);
      info[n] = 0;
      if (strchr(info, '/') == NULL && n > 0) {
        snprintf(path, sizeof path, "%s/%s", out, info);
        NormFileRename(ev.object, path);
      }
    } else if (ev.type == NORM_RX_OBJECT_COMPLETED) {
      printf("completed %.6f\n", wall());
      fflush(stdout);
      return 0;
    } else if (ev.type == NORM_RX_OBJECT_ABORTED) {
      printf("aborted %.6f\n", wall());
      return 1;
    }
  }
  return 1;
}

int main(int argc, char **argv) {
  NormInstanceHandle inst = NormCreateInstance(false);
  if (argc == 11 && strcmp(argv[1], "send") == 0) return send_file(inst, argv + 2);
  if ((argc == 6 || argc == 7) && strcmp(argv[1], "recv") == 0)
    return receive(inst, argv + 2, argc == 7 && strcmp(argv[6], "silent") == 0);
  fprintf(stderr,
          "usage: normcast send GROUP PORT IFACE FILE RATE_BPS SEGMENT K PARITY AUTO\n"
          "       normcast recv GROUP PORT IFACE OUTDIR [silent]\n");
  return 2;
}
