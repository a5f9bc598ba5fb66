// dds_probe.c's twin on eProsima Fast DDS (the DDS of ROS 2's default rmw),
// built against a Fast DDS with its security plugins (Debian's libfastrtps-dev)
// for test_security_enforcement.py.  Same arguments, same output lines:
//
//   fastdds_probe DOMAIN pub TOPIC SECONDS WRITER_ID   write a sample every 20 ms
//   fastdds_probe DOMAIN sub TOPIC SECONDS WANT ID...  count samples per writer id;
//                                                      stop once each writer ID gave WANT
//
//   participant|topic|writer|reader refused <rc> <text>
//   ready, then: matched <n> (pub) | received <writer id> <n> ... (sub)
//
// The security settings come from SAFEMANIP_PROBE_ENCLAVE (an enclave folder of
// the keystore), set as the participant properties rmw_fastrtps sets for
// ROS_SECURITY_ENCLAVE; unset, the participant has no security (an outsider).
// UDP on loopback only, discovery by unicast to the first participants' ports.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/log/Log.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/TopicDataType.hpp>
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastrtps/utils/IPLocator.h>

using namespace eprosima::fastdds::dds;
using eprosima::fastrtps::rtps::InstanceHandle_t;
using eprosima::fastrtps::rtps::SerializedPayload_t;

namespace {

constexpr int kMaxWriters = 16;
constexpr int32_t kSeqPerWriter = 1000000;
constexpr int kPeerParticipants = 64;   // unicast discovery reaches participant ids 0..63 on loopback

std::atomic<bool> stop{false};
void on_signal(int) { stop = true; }

struct Msg { int32_t seq; };

// probe::Msg as XCDR1 little endian: the 4-byte encapsulation header, then the long.
class MsgType : public TopicDataType {
 public:
  MsgType() {
    setName("probe::Msg");
    m_typeSize = 8;
    m_isGetKeyDefined = false;
  }
  bool serialize(void* data, SerializedPayload_t* payload) override {
    const int32_t seq = static_cast<Msg*>(data)->seq;
    const unsigned char header[4] = {0x00, 0x01, 0x00, 0x00};   // CDR_LE
    std::memcpy(payload->data, header, 4);
    std::memcpy(payload->data + 4, &seq, 4);                      // x86_64: little endian
    payload->length = 8;
    payload->encapsulation = CDR_LE;
    return true;
  }
  bool deserialize(SerializedPayload_t* payload, void* data) override {
    if (payload->length < 8 || payload->data[1] != 0x01) return false;
    std::memcpy(&static_cast<Msg*>(data)->seq, payload->data + 4, 4);
    return true;
  }
  std::function<uint32_t()> getSerializedSizeProvider(void*) override {
    return [] { return uint32_t{8}; };
  }
  void* createData() override { return new Msg{0}; }
  void deleteData(void* data) override { delete static_cast<Msg*>(data); }
  bool getKey(void*, InstanceHandle_t*, bool) override { return false; }
};

int refused(const char* what, const char* text) {
  std::printf("%s refused -1 %s\n", what, text);
  std::fflush(stdout);
  return 0;
}

void secure(DomainParticipantQos& qos, const std::string& folder) {
  const std::string f = "file://" + folder + "/";
  auto& props = qos.properties().properties();
  const char* pki = "dds.sec.auth.builtin.PKI-DH.";
  const char* acl = "dds.sec.access.builtin.Access-Permissions.";
  props.emplace_back("dds.sec.auth.plugin", "builtin.PKI-DH");
  props.emplace_back(std::string(pki) + "identity_ca", f + "identity_ca.cert.pem");
  props.emplace_back(std::string(pki) + "identity_certificate", f + "cert.pem");
  props.emplace_back(std::string(pki) + "private_key", f + "key.pem");
  props.emplace_back("dds.sec.crypto.plugin", "builtin.AES-GCM-GMAC");
  props.emplace_back("dds.sec.access.plugin", "builtin.Access-Permissions");
  props.emplace_back(std::string(acl) + "permissions_ca", f + "permissions_ca.cert.pem");
  props.emplace_back(std::string(acl) + "governance", f + "governance.p7s");
  props.emplace_back(std::string(acl) + "permissions", f + "permissions.p7s");
}

void loopback_only(DomainParticipantQos& qos, int domain) {
  auto udp = std::make_shared<eprosima::fastdds::rtps::UDPv4TransportDescriptor>();
  udp->interfaceWhiteList.emplace_back("127.0.0.1");
  qos.transport().use_builtin_transports = false;
  qos.transport().user_transports.push_back(udp);
  // The RTPS well-known metatraffic unicast port of each participant id (spec 9.6.1.1).
  for (int id = 0; id < kPeerParticipants; ++id) {
    eprosima::fastrtps::rtps::Locator_t peer;
    eprosima::fastrtps::rtps::IPLocator::setIPv4(peer, 127, 0, 0, 1);
    peer.port = static_cast<uint32_t>(7400 + 250 * domain + 10 + 2 * id);
    qos.wire_protocol().builtin.initialPeersList.push_back(peer);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || (std::strcmp(argv[2], "pub") != 0 && std::strcmp(argv[2], "sub") != 0)) {
    std::fprintf(stderr, "usage: fastdds_probe DOMAIN pub TOPIC SECONDS WRITER_ID | DOMAIN sub TOPIC SECONDS WANT ID...\n");
    return 2;
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  // Fast DDS logs from a thread of its own to std::cout, in colour and without regard to our lines: a refusal
  // logged at length could run into our answer line.  The answer lines are this probe's only output.
  Log::ClearConsumers();
  const int domain = std::atoi(argv[1]);
  const bool publish = std::strcmp(argv[2], "pub") == 0;
  const double seconds = std::atof(argv[4]);
  const int arg = std::atoi(argv[5]);

  DomainParticipantQos pqos = PARTICIPANT_QOS_DEFAULT;
  loopback_only(pqos, domain);
  if (const char* enclave = std::getenv("SAFEMANIP_PROBE_ENCLAVE"); enclave && *enclave) secure(pqos, enclave);
  auto* factory = DomainParticipantFactory::get_instance();
  DomainParticipant* pp = factory->create_participant(domain, pqos);
  if (pp == nullptr) return refused("participant", "not created (authentication or join access control)");
  TypeSupport type(new MsgType());
  type.register_type(pp);
  Topic* topic = pp->create_topic(argv[3], type.get_type_name(), TOPIC_QOS_DEFAULT);
  if (topic == nullptr) return refused("topic", "not created");
  DataWriter* writer = nullptr;
  DataReader* reader = nullptr;
  if (publish) {
    Publisher* pub = pp->create_publisher(PUBLISHER_QOS_DEFAULT);
    DataWriterQos wqos = DATAWRITER_QOS_DEFAULT;
    wqos.reliability().kind = RELIABLE_RELIABILITY_QOS;
    writer = pub ? pub->create_datawriter(topic, wqos) : nullptr;
    if (writer == nullptr) return refused("writer", "not created (access control)");
  } else {
    Subscriber* sub = pp->create_subscriber(SUBSCRIBER_QOS_DEFAULT);
    DataReaderQos rqos = DATAREADER_QOS_DEFAULT;
    rqos.reliability().kind = RELIABLE_RELIABILITY_QOS;
    reader = sub ? sub->create_datareader(topic, rqos) : nullptr;
    if (reader == nullptr) return refused("reader", "not created (access control)");
  }
  std::printf("ready\n");
  std::fflush(stdout);

  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  Msg msg{arg * kSeqPerWriter};
  int received[kMaxWriters] = {0};
  int32_t matched = 0;
  while (!stop && std::chrono::steady_clock::now() < end) {
    if (publish) {
      writer->write(&msg);
      ++msg.seq;
      PublicationMatchedStatus st;
      if (writer->get_publication_matched_status(st) == ReturnCode_t::RETCODE_OK && st.current_count > matched)
        matched = st.current_count;
    } else {
      Msg in{0};
      SampleInfo info;
      while (reader->take_next_sample(&in, &info) == ReturnCode_t::RETCODE_OK) {
        if (!info.valid_data) continue;
        const int wid = in.seq / kSeqPerWriter;
        if (wid >= 0 && wid < kMaxWriters) ++received[wid];
      }
      bool done = argc > 6;
      for (int i = 6; i < argc; ++i) {
        const int wid = std::atoi(argv[i]);
        if (wid < 0 || wid >= kMaxWriters || received[wid] < arg) done = false;
      }
      if (done) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (publish) {
    std::printf("matched %d\n", matched);
  } else {
    for (int i = 0; i < kMaxWriters; ++i)
      if (received[i]) std::printf("received %d %d\n", i, received[i]);
  }
  std::fflush(stdout);
  pp->delete_contained_entities();
  factory->delete_participant(pp);
  Log::Flush();
  return 0;
}
