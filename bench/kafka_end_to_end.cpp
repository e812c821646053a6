// Kafka → committed durable start, end to end: KafkaSource (librdkafka) and
// the connector runtime into PostgreSQL, on 8-partition topics of ~1 KB JSON
// records. Each row gets a fresh topic and consumer group.
//
// - raw ceiling: one librdkafka consumer + libpq COPY of the same records
//   into a plain table, 500 per COPY transaction, offsets committed
//   synchronously after each — no harvest at all, measured in the same run.
// - harvest, max_in_flight 16 and 64: the topic is pre-filled, then the
//   runtime drains it (max_batch 256); the clock runs from the first pass
//   that receives a record until the last record's offset is acked (the
//   group's commit and the executions in PostgreSQL are then checked to
//   cover every record). KafkaSource's default read-ahead.
//   Latency column: dispatch (map → durable start committed), per record.
// - completed: as above with a worker (concurrency 32: a one-step run mostly
//   waits on PostgreSQL, and the shard's group commit batches as many writes as
//   run threads wait; BENCH_WORKER_CONCURRENCY changes it) in the same
//   process; the clock stops when the last one-step run has completed.
// - --backlog N: one drain of N records in a process of its own, reporting
//   peak RSS (VmHWM).
// - fixed rate: 500 msg/s for 10 s produced while the runtime consumes
//   (max_in_flight 16, poll_timeout 100 ms, idle_backoff 10 ms). Latency
//   column: produce call → the offset commit of a prefix covering the record
//   is sent (commitAsync; after the durable start committed).
//
//   eval "$(scripts/services/kafka.sh start)"
//   HARVEST_DATABASE_URL=postgresql://… KAFKA_BOOTSTRAP=127.0.0.1:19092
//     bench_kafka_end_to_end [messages-per-case=20000]
#include <fmt/format.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafkacpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

#include "support/stats.hpp"
#include <harvest/connector/runtime.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/kafka/kafka_source.hpp>
#include <harvest/kafka/testing/test_broker.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/store/pg.hpp>

using namespace harvest;
using namespace harvest::connector;
using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr int kPartitions = 8;

// Calls of the "ingest" workflow so far: the completion wait polls
// PostgreSQL only once every run has at least been called (a count over the
// executions every few ms would take CPU from the system under test).
std::atomic<long long> ingest_calls{0};

// The latency samples of the case that ran last (for its RESULT line).
std::vector<double> last_latencies;
double last_peak_rss = 0;
// The footprint of the case that ran last (WAL, rows, CPU per record).
bench::Figures last_figures;

// Executions in PostgreSQL started from `topic` (workflow ids "<topic>-<i>").
long long executions_of(store::Connection& db, const std::string& topic,
                        const std::string& status = "") {
  auto r = db.exec(
      "SELECT count(*) AS n FROM harvest_workflow_executions WHERE workflow_name = 'ingest' "
      "AND starts_with(workflow_id, $1) AND ($2 = '' OR status = $2)",
      {topic + "-", status});
  return r ? r->get_int(0, "n") : -1;
}
constexpr size_t kRecordBytes = 1024;

[[noreturn]] void die(const std::string& what) {
  fmt::print(stderr, "bench_kafka_end_to_end: {}\n", what);
  std::exit(1);
}

std::string record(const std::string& id) {
  engine::Json j{{"id", id}, {"pad", ""}};
  const size_t bare = j.dump().size();
  j["pad"] = std::string(kRecordBytes > bare ? kRecordBytes - bare : 0, 'x');
  return j.dump();
}

double micros(SteadyClock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// An asynchronous librdkafka producer. Delivery reports are served by poll()
// on the producing thread and record each record's partition and offset.
class Producer final : public RdKafka::DeliveryReportCb {
 public:
  struct Sent {
    SteadyClock::time_point at;
    int32_t partition = -1;
    int64_t offset = -1;
  };

  Producer(const std::string& bootstrap, const std::string& linger_ms) {
    std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
    std::string err;
    if (conf->set("bootstrap.servers", bootstrap, err) != RdKafka::Conf::CONF_OK ||
        conf->set("linger.ms", linger_ms, err) != RdKafka::Conf::CONF_OK ||
        conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this), err) !=
            RdKafka::Conf::CONF_OK) {
      die("producer config: " + err);
    }
    producer_.reset(RdKafka::Producer::create(conf.get(), err));
    if (!producer_) die("producer: " + err);
  }
  ~Producer() override { producer_->flush(30'000); }

  // Produces `payload` to `partition`, stamping the time of the call.
  void produce(const std::string& topic, int32_t partition, const std::string& payload) {
    const size_t index = sent_.size();
    sent_.push_back({SteadyClock::now()});
    while (true) {
      const auto code = producer_->produce(topic, partition, RdKafka::Producer::RK_MSG_COPY,
                                           const_cast<char*>(payload.data()), payload.size(),
                                           nullptr, 0, 0, nullptr, reinterpret_cast<void*>(index));
      if (code == RdKafka::ERR_NO_ERROR) break;
      if (code != RdKafka::ERR__QUEUE_FULL) die("produce: " + RdKafka::err2str(code));
      producer_->poll(10);
    }
    producer_->poll(0);
  }
  void flush() {
    if (producer_->flush(60'000) != RdKafka::ERR_NO_ERROR) die("producer flush timed out");
    if (failed_ > 0) die(fmt::format("{} records were not delivered", failed_));
  }
  void dr_cb(RdKafka::Message& m) override {
    if (m.err() != RdKafka::ERR_NO_ERROR) {
      ++failed_;
      return;
    }
    auto& s = sent_[reinterpret_cast<size_t>(m.msg_opaque())];
    s.partition = m.partition();
    s.offset = m.offset();
  }
  [[nodiscard]] const std::vector<Sent>& sent() const { return sent_; }

 private:
  std::unique_ptr<RdKafka::Producer> producer_;
  std::vector<Sent> sent_;
  int failed_ = 0;
};

// Forwards to the KafkaSource and notes when each partition's acked head
// moved (ack = the offset commit of the prefix up to and including it).
class AckClock final : public EventSource {
 public:
  explicit AckClock(std::shared_ptr<EventSource> inner) : inner_(std::move(inner)) {}

  Result<std::vector<Message>> receive(size_t max, std::chrono::milliseconds t) override {
    return inner_->receive(max, t);
  }
  Status ack(const std::vector<Message>& messages) override {
    auto status = inner_->ack(messages);
    const auto now = SteadyClock::now();
    std::lock_guard lock(mu_);
    for (const auto& m : messages) {
      const auto& c = std::get<KafkaCoordinates>(m.coordinates);
      acks_[c.partition].push_back({c.offset, now});
    }
    return status;
  }
  Status abandon(const std::vector<Message>& m) override { return inner_->abandon(m); }
  bool abandon_redelivers() const override { return inner_->abandon_redelivers(); }
  Result<bool> recover() override { return inner_->recover(); }
  Result<std::optional<int64_t>> lag(SteadyClock::time_point deadline) override {
    return inner_->lag(deadline);
  }
  std::string subscription_identity() const override { return inner_->subscription_identity(); }
  std::string stream() const override { return inner_->stream(); }

  // When the first ack covering `offset` of `partition` was sent.
  std::optional<SteadyClock::time_point> covered_at(int32_t partition, int64_t offset) const {
    std::lock_guard lock(mu_);
    auto it = acks_.find(partition);
    if (it == acks_.end()) return std::nullopt;
    for (const auto& [head, at] : it->second) {
      if (head >= offset) return at;
    }
    return std::nullopt;
  }

 private:
  std::shared_ptr<EventSource> inner_;
  mutable std::mutex mu_;
  std::map<int32_t, std::vector<std::pair<int64_t, SteadyClock::time_point>>> acks_;
};

void print_row(const std::string& label, size_t msgs, double secs,
               const std::vector<double>& lat_us) {
  fmt::print("{:<48} {:>7} {:>9.0f} {:>8.2f} {:>8.2f} {:>8.1f}\n", label, msgs, msgs / secs,
             bench::percentile_ms(lat_us, 0.5), bench::percentile_ms(lat_us, 0.99),
             bench::rss_mib());
}

std::string fresh_topic(kafka::testing::TestBroker& broker, const std::string& name) {
  if (auto s = broker.create_topic(name, kPartitions); !s) die(s.error().message);
  return name;
}

// Pre-fills `topic` with `n` records round robin over the partitions;
// returns the produce rate.
double fill(const std::string& bootstrap, const std::string& topic, int n) {
  Producer producer(bootstrap, "5");
  const auto t0 = SteadyClock::now();
  for (int i = 0; i < n; ++i) {
    producer.produce(topic, i % kPartitions, record(fmt::format("{}-{}", topic, i)));
  }
  producer.flush();
  return n / std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// `max_buffered`: the KafkaSource read-ahead bound (std::nullopt: its default).
kafka::KafkaSourceConfig consumer_config(const std::string& bootstrap, const std::string& topic,
                                         std::optional<size_t> max_buffered = std::nullopt) {
  auto c = kafka::KafkaSourceConfig(bootstrap, "bench-" + topic, topic)
               .property("auto.offset.reset", "earliest");
  if (max_buffered) c.max_buffered(*max_buffered);
  return c;
}

std::shared_ptr<SourceBinding> ingest_binding(const std::string& name, const std::string& topic,
                                              size_t max_in_flight) {
  auto binding = std::make_shared<SourceBinding>(SourceBinding::starts(name, topic, "ingest"));
  binding->map_json([](const MessageCtx&, engine::Json j) -> MapResult {
    return MappedMessage{j.at("id").get<std::string>(), j};
  });
  binding->max_in_flight(max_in_flight);
  return binding;
}

// librdkafka consume + COPY into a plain table; no harvest.
double raw_ceiling(const std::string& bootstrap, kafka::testing::TestBroker& broker,
                   store::Connection& db, const std::string& run, int n) {
  const auto topic = fresh_topic(broker, "bench-raw-" + run);
  fill(bootstrap, topic, n);
  if (auto r = db.exec(
          "CREATE TABLE IF NOT EXISTS bench_kafka_raw (topic text NOT NULL, part integer NOT "
          "NULL, off bigint NOT NULL, payload jsonb NOT NULL)");
      !r) {
    die(r.error().message);
  }
  const auto footprint = bench::Footprint::begin(db);
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string err;
  for (const auto& [k, v] : std::map<std::string, std::string>{{"bootstrap.servers", bootstrap},
                                                               {"group.id", "bench-" + topic},
                                                               {"auto.offset.reset", "earliest"},
                                                               {"enable.auto.commit", "false"}}) {
    if (conf->set(k, v, err) != RdKafka::Conf::CONF_OK) die(err);
  }
  std::unique_ptr<RdKafka::KafkaConsumer> consumer(RdKafka::KafkaConsumer::create(conf.get(), err));
  if (!consumer) die(err);
  consumer->subscribe({topic});

  constexpr size_t kCopyBatch = 500;
  std::vector<std::unique_ptr<RdKafka::Message>> batch;
  std::vector<double> copy_us;
  size_t copied = 0;
  std::optional<SteadyClock::time_point> t0;
  const auto copy = [&] {
    const auto t = SteadyClock::now();
    auto begin = db.exec("BEGIN");
    if (!begin) die(begin.error().message);
    PGconn* pg = db.raw();
    PGresult* started = PQexec(pg, "COPY bench_kafka_raw (topic, part, off, payload) FROM STDIN");
    if (PQresultStatus(started) != PGRES_COPY_IN) die(PQerrorMessage(pg));
    PQclear(started);
    std::string rows;
    for (const auto& m : batch) {
      // COPY text format; the JSON records carry no tab, newline or backslash.
      rows += fmt::format("{}\t{}\t{}\t", topic, m->partition(), m->offset());
      rows.append(static_cast<const char*>(m->payload()), m->len());
      rows += '\n';
    }
    if (PQputCopyData(pg, rows.data(), static_cast<int>(rows.size())) != 1 ||
        PQputCopyEnd(pg, nullptr) != 1) {
      die(PQerrorMessage(pg));
    }
    PGresult* done = PQgetResult(pg);
    if (PQresultStatus(done) != PGRES_COMMAND_OK) die(PQerrorMessage(pg));
    PQclear(done);
    while (PGresult* extra = PQgetResult(pg)) PQclear(extra);
    if (auto c = db.exec("COMMIT"); !c) die(c.error().message);
    if (const auto code = consumer->commitSync(); code != RdKafka::ERR_NO_ERROR) {
      die("commitSync: " + RdKafka::err2str(code));
    }
    copied += batch.size();
    copy_us.push_back(micros(SteadyClock::now() - t));
    batch.clear();
  };
  const auto deadline = SteadyClock::now() + 120s;
  while (copied < static_cast<size_t>(n) && SteadyClock::now() < deadline) {
    std::unique_ptr<RdKafka::Message> m(consumer->consume(100));
    if (m->err() == RdKafka::ERR_NO_ERROR) {
      if (!t0) t0 = SteadyClock::now();
      batch.push_back(std::move(m));
      if (batch.size() >= kCopyBatch) copy();
    } else if (m->err() == RdKafka::ERR__TIMED_OUT || m->err() == RdKafka::ERR__PARTITION_EOF) {
      if (!batch.empty()) copy();
    } else {
      die("consume: " + m->errstr());
    }
  }
  if (copied < static_cast<size_t>(n)) die("raw consumer did not finish in time");
  const double secs = std::chrono::duration<double>(SteadyClock::now() - *t0).count();
  consumer->close();
  last_figures = footprint.end(db, copied);
  print_row("raw ceiling: consume + COPY 500 + commitSync", copied, secs, copy_us);
  (void)db.exec("DROP TABLE bench_kafka_raw");  // best effort: leave nothing behind
  last_latencies = copy_us;
  return copied / secs;
}

// Drains a pre-filled topic through the runtime; with `complete`, a worker
// in the same process runs every started workflow and the clock stops when
// the last run completed. Returns msgs/s; dies if any count is off.
double drain(const std::string& bootstrap, kafka::testing::TestBroker& broker,
             engine::Engine& engine, store::Connection& db, const std::string& run, int n,
             size_t max_in_flight, std::optional<size_t> max_buffered, bool complete = false,
             const std::string& prefix = "bench") {
  const auto topic =
      fresh_topic(broker, fmt::format("{}-mif{}-buf{}{}-{}", prefix, max_in_flight,
                                      max_buffered.value_or(0), complete ? "-run" : "", run));
  fill(bootstrap, topic, n);
  std::unique_ptr<engine::Worker> worker;
  const long long calls_before = ingest_calls.load();
  const auto footprint = bench::Footprint::begin(db);
  if (complete) {
    // BENCH_WORKER_CONCURRENCY overrides the 32 run threads, for sizing runs.
    const char* threads = std::getenv("BENCH_WORKER_CONCURRENCY");
    worker = std::make_unique<engine::Worker>(
        engine, engine::WorkerConfig{.concurrency = threads ? std::atoi(threads) : 32});
    worker->start();
  }
  double peak_rss = 0;
  auto source = kafka::KafkaSource::connect(consumer_config(bootstrap, topic, max_buffered));
  if (!source) die(source.error().message);
  auto metrics = std::make_shared<metrics::RecordingMetrics>();
  ConnectorRuntime rt(ingest_binding(topic, topic, max_in_flight), *source, engine, metrics,
                      IdempotencyMode::kAuto,
                      ConnectorRuntimeConfig{.poll_timeout = 100ms, .max_batch = 256});
  rt.with_dead_letter_sink(std::make_shared<RecordingDeadLetterSink>());
  size_t acked = 0;
  std::optional<SteadyClock::time_point> t0;
  // 120 s plus 1 ms per record: a drain at under 1,000 msg/s fails loudly.
  const auto deadline = SteadyClock::now() + 120s + std::chrono::milliseconds(n);
  while (acked < static_cast<size_t>(n) && SteadyClock::now() < deadline) {
    const auto pass_started = SteadyClock::now();
    auto s = rt.run_once();
    if (!s) die("pass failed: " + s.error().message);
    if (s->retried || s->dead_lettered) die("a record was retried or dead-lettered");
    if (s->received > 0 && !t0) t0 = pass_started;
    acked += s->acked;
    peak_rss = std::max(peak_rss, bench::rss_mib());
  }
  if (acked < static_cast<size_t>(n)) die("the runtime did not drain the topic in time");
  if (complete) {
    for (auto until = SteadyClock::now() + 300s; SteadyClock::now() < until;) {
      if (ingest_calls.load() >= calls_before + n && executions_of(db, topic, "completed") >= n) {
        break;
      }
      std::this_thread::sleep_for(5ms);  // waiting for the last completion
    }
    worker->stop();
  }
  const double secs = std::chrono::duration<double>(SteadyClock::now() - *t0).count();
  if (const auto started = executions_of(db, topic); started != n) {
    die(fmt::format("{} executions in PostgreSQL for {} records", started, n));
  }
  if (complete && executions_of(db, topic, "completed") != n) die("not every run completed");
  // Not timed: the group's commit must really cover every record.
  std::map<int32_t, int64_t> end;
  for (int p = 0; p < kPartitions; ++p) end[p] = n / kPartitions + (p < n % kPartitions ? 1 : 0);
  std::map<int32_t, int64_t> committed;
  for (auto until = SteadyClock::now() + 30s; SteadyClock::now() < until && committed != end;) {
    auto c = broker.committed("bench-" + topic, topic);
    if (c) committed = *c;
    if (committed != end) std::this_thread::sleep_for(20ms);  // polling the broker
  }
  if (committed != end) die("the group's commit does not cover every record");
  last_figures = footprint.end(db, n);
  auto lat = metrics->observations(metrics::kConnectorDispatchSeconds, {{"source", topic}});
  for (auto& v : lat) v *= 1e6;
  print_row(fmt::format("harvest mif {:>2}, max_buffered {:>6}{}", max_in_flight,
                        max_buffered ? std::to_string(*max_buffered) : "*",
                        complete ? ", completed" : ""),
            acked, secs, lat);
  last_latencies = lat;
  last_peak_rss = peak_rss;
  return n / secs;
}

void fixed_rate(const std::string& bootstrap, kafka::testing::TestBroker& broker,
                engine::Engine& engine, const std::string& run, int rate, int seconds) {
  const auto topic = fresh_topic(broker, "bench-rate-" + run);
  auto source = kafka::KafkaSource::connect(consumer_config(bootstrap, topic));
  if (!source) die(source.error().message);
  auto clock = std::make_shared<AckClock>(*source);
  ConnectorRuntime rt(
      ingest_binding(topic, topic, 16), clock, engine, std::make_shared<metrics::NoopMetrics>(),
      IdempotencyMode::kAuto,
      ConnectorRuntimeConfig{.poll_timeout = 100ms, .idle_backoff = 10ms, .max_batch = 256});
  rt.with_dead_letter_sink(std::make_shared<RecordingDeadLetterSink>());
  std::jthread consumer([&](std::stop_token stop) {
    if (auto s = rt.run(stop); !s) die(s.error().message);
  });
  // Let the consumer join the group before the clock starts: the first
  // records would otherwise wait for the assignment.
  for (auto until = SteadyClock::now() + 30s; SteadyClock::now() < until;) {
    if (!(*source)->snapshot().owned.empty()) break;
    std::this_thread::sleep_for(20ms);
  }

  Producer producer(bootstrap, "0");
  const int n = rate * seconds;
  const auto interval = std::chrono::nanoseconds(1'000'000'000 / rate);
  const auto t0 = SteadyClock::now();
  for (int i = 0; i < n; ++i) {
    // Pacing the producer at the fixed rate (the load under test).
    std::this_thread::sleep_until(t0 + i * interval);
    producer.produce(topic, i % kPartitions, record(fmt::format("{}-{}", topic, i)));
  }
  producer.flush();
  const double produce_secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();

  std::vector<double> lat;
  for (auto until = SteadyClock::now() + 60s; SteadyClock::now() < until;) {
    lat.clear();
    for (const auto& s : producer.sent()) {
      auto at = clock->covered_at(s.partition, s.offset);
      if (!at) break;
      lat.push_back(micros(*at - s.at));
    }
    if (lat.size() == static_cast<size_t>(n)) break;
    std::this_thread::sleep_for(50ms);
  }
  consumer.request_stop();
  consumer.join();
  if (lat.size() != static_cast<size_t>(n)) die("not every record was acked in time");
  print_row(fmt::format("{}/s for {} s, mif 16 (produce -> commit sent)", rate, seconds), n,
            produce_secs, lat);
  fmt::print("{:<48} max {:.2f} ms\n", "", *std::max_element(lat.begin(), lat.end()) / 1000.0);
}

}  // namespace

int main(int argc, char** argv) {
  // bench_kafka_end_to_end [n=20000] | --backlog [n=1000000]
  const bool backlog = argc > 1 && std::string(argv[1]) == "--backlog";
  const int n =
      argc > (backlog ? 2 : 1) ? std::atoi(argv[backlog ? 2 : 1]) : (backlog ? 1'000'000 : 20'000);
  const char* env = std::getenv("KAFKA_BOOTSTRAP");
  const std::string bootstrap = env && *env ? env : "127.0.0.1:19092";
  auto broker = kafka::testing::TestBroker::connect(bootstrap);
  if (!broker) die(broker.error().message);

  engine::WorkflowRegistry r;
  r.add("ingest", [](engine::WorkflowContext&, engine::Json in) {
    ++ingest_calls;
    return in.size();
  });
  engine::EngineConfig config;
  config.profile = engine::Profile::kDev;
  config.pool_size = 72;
  auto engine = engine::Engine::open(config, std::move(r), {connector_migrations()});
  if (!engine) die(engine.error().message);
  auto db = store::Connection::open((*engine)->database_url());
  if (!db) die(db.error().message);

  const std::string run = fmt::format("{}-{}", std::time(nullptr), ::getpid());
  fmt::print("Kafka {} -> PostgreSQL, {} partitions, {}-byte JSON records, {} per drain case\n",
             bootstrap, kPartitions, record("x").size(), n);
  fmt::print("{:<48} {:>7} {:>9} {:>8} {:>8} {:>8}\n", "case", "msgs", "msgs/s", "p50 ms", "p99 ms",
             "RSS MiB");
  if (backlog) {
    // One process per backlog run, so its peak RSS is this case's alone.
    const double rate = drain(bootstrap, **broker, **engine, **db, run, n, 16, std::nullopt, false,
                              "bench-backlog");
    bench::result_line("kafka_backlog_1m", rate, 0, last_latencies, bench::peak_rss_mib(),
                       last_figures);
    return 0;
  }
  if (const char* only = std::getenv("BENCH_ONLY"); only && *only) {
    // One drain case alone (BENCH_ONLY=start|complete), for profiling it or
    // for a variant of it (BENCH_CASE_SUFFIX names it, BENCH_CEILING is the
    // same run's ceiling, e.g. scripts/bench.sh --pgbouncer).
    const bool complete = std::string(only) == "complete";
    const double rate =
        drain(bootstrap, **broker, **engine, **db, run, n, 16, std::nullopt, complete);
    const char* suffix = std::getenv("BENCH_CASE_SUFFIX");
    const char* ceiling = std::getenv("BENCH_CEILING");
    bench::result_line(
        std::string(complete ? "kafka_complete" : "kafka_start") + (suffix ? suffix : ""), rate,
        ceiling ? std::atof(ceiling) : 0, last_latencies, last_peak_rss, last_figures);
    return 0;
  }
  const double ceiling = raw_ceiling(bootstrap, **broker, **db, run, n);
  const auto ceiling_lat = last_latencies;
  const auto ceiling_figures = last_figures;
  // The completed case runs first: its worker would otherwise also run every
  // execution the start-only cases left pending.
  const double complete =
      drain(bootstrap, **broker, **engine, **db, run, n, 16, std::nullopt, /*complete=*/true);
  const auto complete_lat = last_latencies;
  const double complete_rss = last_peak_rss;
  const auto complete_figures = last_figures;
  const double start = drain(bootstrap, **broker, **engine, **db, run, n, 16, std::nullopt);
  const auto start_lat = last_latencies;
  const double start_rss = last_peak_rss;
  const auto start_figures = last_figures;
  (void)drain(bootstrap, **broker, **engine, **db, run, n, 64, std::nullopt);
  fixed_rate(bootstrap, **broker, **engine, run, 500, 10);
  fmt::print(
      "latency columns: raw = one COPY of 500 + commitSync; harvest mif rows = dispatch (map -> "
      "durable start committed), max_in_flight, max_batch 256, * = KafkaSource default; fixed "
      "rate = produce call -> offset commit of a covering prefix sent\n");
  bench::result_line("kafka_ceiling", ceiling, ceiling, ceiling_lat, bench::rss_mib(),
                     ceiling_figures);
  bench::result_line("kafka_start", start, ceiling, start_lat, start_rss, start_figures);
  bench::result_line("kafka_complete", complete, ceiling, complete_lat, complete_rss,
                     complete_figures);
  return 0;
}
