/* One DDS participant that tries to publish or subscribe one topic name, for
 * test_security_enforcement.py.  Its security settings (or none) come from
 * CYCLONEDDS_URI, so the same binary is a secured enclave or an outsider.
 *
 *   dds_probe DOMAIN pub TOPIC SECONDS WRITER_ID   write a sample every 20 ms
 *   dds_probe DOMAIN sub TOPIC SECONDS WANT ID...  count samples per writer id;
 *                                                  stop once each writer ID gave WANT
 *
 * Prints one line per outcome, read by the test:
 *   participant|topic|writer|reader refused <rc> <text>
 *   ready, then: matched <n> (pub) | received <writer id> <n> ... (sub)
 * SIGTERM or SIGINT ends the loop early, with the same final lines.
 * Exit 0 whatever the outcome: a refusal is an answer, not an error. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dds/dds.h"
#include "probe.h"

#define MAX_WRITERS 16
#define SEQ_PER_WRITER 1000000

static volatile sig_atomic_t stop = 0;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int refused(const char *what, dds_return_t rc) {
  printf("%s refused %d %s\n", what, (int)rc, dds_strretcode(rc));
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 6 || (strcmp(argv[2], "pub") != 0 && strcmp(argv[2], "sub") != 0)) {
    fprintf(stderr, "usage: dds_probe DOMAIN pub TOPIC SECONDS WRITER_ID | DOMAIN sub TOPIC SECONDS WANT ID...\n");
    return 2;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  const dds_domainid_t domain = (dds_domainid_t)atoi(argv[1]);
  const int publish = strcmp(argv[2], "pub") == 0;
  const double seconds = atof(argv[4]);
  const int arg = atoi(argv[5]);
  dds_entity_t pp = dds_create_participant(domain, NULL, NULL);
  if (pp < 0) return refused("participant", pp);
  dds_entity_t topic = dds_create_topic(pp, &probe_Msg_desc, argv[3], NULL, NULL);
  if (topic < 0) return refused("topic", topic);
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
  dds_entity_t ep = publish ? dds_create_writer(pp, topic, qos, NULL) : dds_create_reader(pp, topic, qos, NULL);
  dds_delete_qos(qos);
  if (ep < 0) return refused(publish ? "writer" : "reader", ep);
  printf("ready\n");
  fflush(stdout);
  const dds_time_t end = dds_time() + (dds_time_t)(seconds * 1e9);
  int32_t seq = arg * SEQ_PER_WRITER;
  int received[MAX_WRITERS] = {0};
  uint32_t matched = 0;
  while (!stop && dds_time() < end) {
    if (publish) {
      probe_Msg msg = {seq++};
      dds_write(ep, &msg);
      dds_publication_matched_status_t st;
      if (dds_get_publication_matched_status(ep, &st) == 0 && st.current_count > matched) matched = st.current_count;
    } else {
      void *samples[1] = {NULL};
      dds_sample_info_t info[1];
      dds_return_t n;
      while ((n = dds_take(ep, samples, info, 1, 1)) > 0) {
        if (info[0].valid_data) {
          const int wid = ((const probe_Msg *)samples[0])->seq / SEQ_PER_WRITER;
          if (wid >= 0 && wid < MAX_WRITERS) received[wid]++;
        }
        dds_return_loan(ep, samples, n);
      }
      int done = argc > 6;
      for (int i = 6; i < argc; i++) {
        const int wid = atoi(argv[i]);
        if (wid < 0 || wid >= MAX_WRITERS || received[wid] < arg) done = 0;
      }
      if (done) break;
    }
    dds_sleepfor(DDS_MSECS(20));
  }
  if (publish) {
    printf("matched %u\n", matched);
  } else {
    for (int i = 0; i < MAX_WRITERS; i++)
      if (received[i]) printf("received %d %d\n", i, received[i]);
  }
  fflush(stdout);
  dds_delete(pp);
  return 0;
}
