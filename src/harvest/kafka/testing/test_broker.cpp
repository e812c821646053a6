#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <random>
#include <thread>

#include <harvest/kafka/broker_calls.hpp>
#include <harvest/kafka/testing/test_broker.hpp>

namespace harvest::kafka::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

using AdminEvent = std::unique_ptr<rd_kafka_event_t, decltype(&rd_kafka_event_destroy)>;

// One Admin API call: `send` issues it with options whose operation and
// request timeouts are `timeout`, on a queue this waits on for the answer.
// Errors name `what`.
Result<AdminEvent> admin_call(
    rd_kafka_t* rk, rd_kafka_admin_op_t op, std::chrono::milliseconds timeout,
    const std::string& what,
    const std::function<void(rd_kafka_AdminOptions_t*, rd_kafka_queue_t*)>& send) {
  char errstr[512];
  std::unique_ptr<rd_kafka_AdminOptions_t, decltype(&rd_kafka_AdminOptions_destroy)> options(
      rd_kafka_AdminOptions_new(rk, op), &rd_kafka_AdminOptions_destroy);
  // The broker answers once the operation is done, not when it was merely
  // accepted.
  const int ms = static_cast<int>(timeout.count());
  if (rd_kafka_AdminOptions_set_operation_timeout(options.get(), ms, errstr, sizeof(errstr)) ||
      rd_kafka_AdminOptions_set_request_timeout(options.get(), ms, errstr, sizeof(errstr))) {
    return fail(Error::bad_request(fmt::format("AdminOptions: {}", errstr)));
  }
  std::unique_ptr<rd_kafka_queue_t, decltype(&rd_kafka_queue_destroy)> queue(
      rd_kafka_queue_new(rk), &rd_kafka_queue_destroy);
  send(options.get(), queue.get());
  AdminEvent ev(rd_kafka_queue_poll(queue.get(), ms + 5000), &rd_kafka_event_destroy);
  if (!ev) return fail(Error::transient_error(what + ": no answer from the broker"));
  if (rd_kafka_event_error(ev.get()) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return fail(
        Error::transient_error(fmt::format("{}: {}", what, rd_kafka_event_error_string(ev.get()))));
  }
  return ev;
}

// What the delivery report of one produce() says.
struct Delivery {
  bool done = false;
  RdKafka::ErrorCode err = RdKafka::ERR_NO_ERROR;
  int64_t offset = -1;
};

}  // namespace

// Delivery reports are served by poll() on the producing thread; each
// message carries a pointer to its Delivery as the opaque.
class TestBroker::DeliveryReports final : public RdKafka::DeliveryReportCb {
 public:
  void dr_cb(RdKafka::Message& message) override {
    auto* delivery = static_cast<Delivery*>(message.msg_opaque());
    delivery->err = message.err();
    delivery->offset = message.offset();
    delivery->done = true;
  }
};

Result<std::string> bootstrap_from_env() {
  const char* value = std::getenv("HARVEST_TEST_KAFKA_BOOTSTRAP");
  if (value == nullptr || *value == '\0') {
    return fail(Error::config(
        "HARVEST_TEST_KAFKA_BOOTSTRAP is not set: run the kafka tests through scripts/test.sh, "
        "or start a broker with `eval \"$(scripts/services/kafka.sh start)\"` and export "
        "HARVEST_TEST_KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP"));
  }
  return std::string(value);
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const uint32_t salt = std::random_device{}();
  return fmt::format("{}-{}-{}-{:08x}", prefix, ::getpid(), counter.fetch_add(1), salt);
}

TestBroker::TestBroker(std::string bootstrap, std::unique_ptr<DeliveryReports> reports,
                       std::unique_ptr<RdKafka::Producer> producer)
    : bootstrap_(std::move(bootstrap)),
      reports_(std::move(reports)),
      producer_(std::move(producer)) {}

TestBroker::~TestBroker() {
  if (producer_) producer_->flush(5000);
}

Result<std::unique_ptr<TestBroker>> TestBroker::connect(std::string bootstrap) {
  auto reports = std::make_unique<DeliveryReports>();
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string errstr;
  if (conf->set("bootstrap.servers", bootstrap, errstr) != RdKafka::Conf::CONF_OK ||
      conf->set("dr_cb", reports.get(), errstr) != RdKafka::Conf::CONF_OK ||
      conf->set("linger.ms", "0", errstr) != RdKafka::Conf::CONF_OK) {
    return fail(Error::config("TestBroker: " + errstr));
  }
  std::unique_ptr<RdKafka::Producer> producer(RdKafka::Producer::create(conf.get(), errstr));
  if (!producer) return fail(Error::config("TestBroker: creating the producer: " + errstr));
  return std::unique_ptr<TestBroker>(
      new TestBroker(std::move(bootstrap), std::move(reports), std::move(producer)));
}

Status TestBroker::delete_topic(const std::string& topic, std::chrono::milliseconds timeout) {
  rd_kafka_t* rk = producer_->c_ptr();
  std::unique_ptr<rd_kafka_DeleteTopic_t, decltype(&rd_kafka_DeleteTopic_destroy)> del(
      rd_kafka_DeleteTopic_new(topic.c_str()), &rd_kafka_DeleteTopic_destroy);
  auto ev = admin_call(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS, timeout, "DeleteTopics " + topic,
                       [&](rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                         rd_kafka_DeleteTopic_t* topics[] = {del.get()};
                         rd_kafka_DeleteTopics(rk, topics, 1, options, queue);
                       });
  if (!ev) return fail(ev.error());
  size_t count = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev->get()), &count);
  for (size_t i = 0; i < count; ++i) {
    if (const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return fail(Error::transient_error(fmt::format(
          "DeleteTopics {}: {}", topic, rd_kafka_topic_result_error_string(results[i]))));
    }
  }
  // Until the metadata of this handle no longer lists it.
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    RdKafka::Metadata* raw = nullptr;
    if (producer_->metadata(true, nullptr, &raw, 2000) == RdKafka::ERR_NO_ERROR) {
      std::unique_ptr<RdKafka::Metadata> md(raw);
      bool listed = false;
      for (const auto* t : *md->topics()) listed = listed || t->topic() == topic;
      if (!listed) return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return fail(Error::transient_error(fmt::format("topic {} still listed after deletion", topic)));
}

Status TestBroker::create_topic(const std::string& topic, int partitions,
                                std::chrono::milliseconds timeout) {
  rd_kafka_t* rk = producer_->c_ptr();
  char errstr[512];
  std::unique_ptr<rd_kafka_NewTopic_t, decltype(&rd_kafka_NewTopic_destroy)> new_topic(
      rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, errstr, sizeof(errstr)),
      &rd_kafka_NewTopic_destroy);
  if (!new_topic) return fail(Error::bad_request(fmt::format("NewTopic {}: {}", topic, errstr)));
  auto ev = admin_call(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout, "CreateTopics " + topic,
                       [&](rd_kafka_AdminOptions_t* options, rd_kafka_queue_t* queue) {
                         rd_kafka_NewTopic_t* topics[] = {new_topic.get()};
                         rd_kafka_CreateTopics(rk, topics, 1, options, queue);
                       });
  if (!ev) return fail(ev.error());
  const auto* result = rd_kafka_event_CreateTopics_result(ev->get());
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(result, &count);
  for (size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      return fail(Error::conflict(fmt::format("topic {} already exists", topic)));
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return fail(Error::transient_error(fmt::format(
          "CreateTopics {}: {}", topic, rd_kafka_topic_result_error_string(results[i]))));
    }
  }

  // Wait until this handle's metadata shows every partition with a leader,
  // so the first produce does not race the topic's propagation.
  const auto deadline = SteadyClock::now() + timeout;
  std::string last_error;
  while (SteadyClock::now() < deadline) {
    std::string err;
    std::unique_ptr<RdKafka::Topic> rkt(
        RdKafka::Topic::create(producer_.get(), topic, nullptr, err));
    RdKafka::Metadata* raw = nullptr;
    const auto code =
        producer_->metadata(false, rkt.get(), &raw, std::max(1, detail::remaining_ms(deadline)));
    std::unique_ptr<RdKafka::Metadata> md(raw);
    if (code == RdKafka::ERR_NO_ERROR) {
      for (const auto* t : *md->topics()) {
        if (t->topic() != topic || t->err() != RdKafka::ERR_NO_ERROR) continue;
        int with_leader = 0;
        for (const auto* p : *t->partitions()) {
          if (p->err() == RdKafka::ERR_NO_ERROR && p->leader() >= 0) ++with_leader;
        }
        if (with_leader == partitions) return {};
      }
      last_error = "not all partitions have a leader yet";
    } else {
      last_error = RdKafka::err2str(code);
    }
  }
  return fail(
      Error::transient_error(fmt::format("topic {} not ready in time: {}", topic, last_error)));
}

Result<int64_t> TestBroker::produce(const std::string& topic, const Record& record,
                                    std::chrono::milliseconds timeout) {
  RdKafka::Headers* headers = nullptr;
  if (!record.headers.empty()) {
    headers = RdKafka::Headers::create();
    for (const auto& [k, v] : record.headers) headers->add(k, v.data(), v.size());
  }
  Delivery delivery;
  const auto code = producer_->produce(
      topic, record.partition, RdKafka::Producer::RK_MSG_COPY,
      const_cast<char*>(record.payload.data()), record.payload.size(),
      record.key ? record.key->data() : nullptr, record.key ? record.key->size() : 0,
      /*timestamp=*/0, headers, &delivery);
  if (code != RdKafka::ERR_NO_ERROR) {
    delete headers;  // ownership passes to librdkafka only on success
    return fail(detail::to_error(code, "produce to " + topic));
  }
  const auto deadline = SteadyClock::now() + timeout;
  while (!delivery.done && SteadyClock::now() < deadline) {
    producer_->poll(std::max(1, std::min(100, detail::remaining_ms(deadline))));
  }
  if (!delivery.done) {
    // The report would later write to a dead stack object: wait for it.
    producer_->flush(60'000);
    producer_->poll(0);
    return fail(Error::transient_error("produce to " + topic + ": no delivery report in time"));
  }
  if (delivery.err != RdKafka::ERR_NO_ERROR) {
    return fail(detail::to_error(delivery.err, "delivery to " + topic));
  }
  return delivery.offset;
}

Result<std::unique_ptr<RdKafka::KafkaConsumer>> TestBroker::outside_consumer(
    const std::string& group) const {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string errstr;
  if (conf->set("bootstrap.servers", bootstrap_, errstr) != RdKafka::Conf::CONF_OK ||
      conf->set("group.id", group, errstr) != RdKafka::Conf::CONF_OK ||
      conf->set("enable.auto.commit", "false", errstr) != RdKafka::Conf::CONF_OK) {
    return fail(Error::config("TestBroker: " + errstr));
  }
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(conf.get(), errstr));
  if (!consumer) return fail(Error::config("TestBroker: creating a consumer: " + errstr));
  return consumer;
}

Result<std::map<int32_t, int64_t>> TestBroker::committed(const std::string& group,
                                                         const std::string& topic,
                                                         std::chrono::milliseconds timeout) {
  auto consumer = outside_consumer(group);
  if (!consumer) return fail(consumer.error());
  const auto deadline = SteadyClock::now() + timeout;
  auto partitions = detail::topic_partitions(
      **consumer, topic, std::chrono::milliseconds(detail::remaining_ms(deadline)));
  if (!partitions) {
    (*consumer)->close();
    return fail(partitions.error().error());
  }
  auto offsets = detail::committed_offsets(
      **consumer, topic, *partitions, std::chrono::milliseconds(detail::remaining_ms(deadline)));
  (*consumer)->close();
  if (!offsets) return fail(offsets.error().error());
  return *offsets;
}

Result<std::vector<int32_t>> TestBroker::rewind_as_member(const std::string& group,
                                                          const std::string& topic, int64_t offset,
                                                          std::chrono::milliseconds timeout) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string errstr;
  for (const auto& [k, v] :
       std::map<std::string, std::string>{{"bootstrap.servers", bootstrap_},
                                          {"group.id", group},
                                          {"enable.auto.commit", "false"},
                                          {"partition.assignment.strategy", "range"},
                                          {"heartbeat.interval.ms", "250"},
                                          {"session.timeout.ms", "6000"}}) {
    if (conf->set(k, v, errstr) != RdKafka::Conf::CONF_OK) {
      return fail(Error::config("TestBroker: " + errstr));
    }
  }
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(
      RdKafka::KafkaConsumer::create(conf.get(), errstr));
  if (!consumer) return fail(Error::config("TestBroker: creating a consumer: " + errstr));
  if (auto code = consumer->subscribe({topic}); code != RdKafka::ERR_NO_ERROR) {
    return fail(detail::to_error(code, "subscribe to " + topic));
  }
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<RdKafka::TopicPartition*> assigned;
  while (assigned.empty() && SteadyClock::now() < deadline) {
    // Polling serves the rebalance; a record fetched meanwhile is not read.
    std::unique_ptr<RdKafka::Message> m(consumer->consume(100));
    (void)consumer->assignment(assigned);
  }
  std::vector<int32_t> partitions;
  std::map<int32_t, int64_t> offsets;
  for (auto* tp : assigned) {
    partitions.push_back(tp->partition());
    offsets[tp->partition()] = offset;
  }
  RdKafka::TopicPartition::destroy(assigned);
  if (partitions.empty()) {
    consumer->close();
    return fail(Error::transient_error("TestBroker: no partition of " + topic + " assigned"));
  }
  auto r = detail::commit_offsets(*consumer, topic, offsets,
                                  std::chrono::milliseconds(detail::remaining_ms(deadline)));
  consumer->close();
  if (!r) return fail(r.error().error());
  return partitions;
}

std::map<int32_t, int64_t> TestBroker::await_committed(const std::string& group,
                                                       const std::string& topic,
                                                       const std::map<int32_t, int64_t>& expected,
                                                       std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  std::map<int32_t, int64_t> last;
  while (true) {
    auto c = committed(group, topic);
    last = c ? *c : std::map<int32_t, int64_t>{};
    if (last == expected || std::chrono::steady_clock::now() >= deadline) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling the broker, not syncing
  }
}

}  // namespace harvest::kafka::testing
