// SQS → durable start: messages/s through SqsSource and the connector runtime
// (receive batches of 10, max_in_flight 16, DeleteMessageBatch acks, with and
// without receive-ahead) into
// PostgreSQL, with p50/p99 dispatch latency (map → durable start committed)
// and RSS. Each case pre-fills its own fresh queue with SendMessageBatch and
// times the runtime draining it. A first row drains a queue with bare
// ReceiveMessage + DeleteMessageBatch and no harvest at all: the emulator's
// own ceiling for one consumer loop, to read the other rows against.
//
//   eval "$(scripts/services/sqs.sh start)"
//   HARVEST_DATABASE_URL=postgresql://... bench_sqs_start [messages-per-case=5000]
//
// SQS endpoint: AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL, default the local
// server (http://127.0.0.1:19324); dummy credentials for a local endpoint.
#include <fmt/format.h>

#include <cstdlib>

#include "support/stats.hpp"
#include <harvest/connector/runtime.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/sqs/sqs_client.hpp>
#include <harvest/sqs/sqs_source.hpp>
#include <harvest/store/pg.hpp>

using namespace harvest;
using namespace harvest::connector;
using SteadyClock = std::chrono::steady_clock;

namespace {

void default_to_local_server() {
  if (!std::getenv("AWS_ENDPOINT_URL_SQS") && !std::getenv("AWS_ENDPOINT_URL"))
    ::setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:19324", 1);
  ::setenv("AWS_REGION", "us-east-1", 0);
  ::setenv("AWS_ACCESS_KEY_ID", "local", 0);
  ::setenv("AWS_SECRET_ACCESS_KEY", "local", 0);
}

// A fresh queue holding `n` ~1 KB JSON messages; returns its URL and the
// send rate.
Result<std::pair<std::string, double>> filled_queue(sqs::SqsClient& client, const std::string& name,
                                                    int n) {
  auto url = client.create_queue(name);
  if (!url) return fail(url.error());
  const std::string pad(900, 'x');
  auto t0 = SteadyClock::now();
  for (int start = 0; start < n; start += 10) {
    std::vector<sqs::OutgoingMessage> batch;
    for (int i = start; i < std::min(n, start + 10); ++i) {
      batch.push_back(
          {.id = std::to_string(i),
           .body = engine::Json{{"id", fmt::format("{}-{}", name, i)}, {"pad", pad}}.dump()});
    }
    auto sent = client.send_message_batch(*url, batch);
    if (!sent) return fail(sent.error());
    if (!sent->failed.empty())
      return fail(Error::internal("SendMessageBatch failed: " + sent->failed[0].message));
  }
  double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return std::pair{*url, n / secs};
}

void print_row(const std::string& label, size_t msgs, double secs, std::vector<double> lat_us) {
  fmt::print("{:<42} {:>7} {:>9.0f} {:>8.2f} {:>8.2f} {:>8.1f}\n", label, msgs, msgs / secs,
             bench::percentile_ms(lat_us, 0.5), bench::percentile_ms(lat_us, 0.99),
             bench::rss_mib());
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 5000;
  default_to_local_server();
  auto client = sqs::SqsClient::create();
  if (!client) {
    fmt::print(stderr, "{}\n", client.error().describe());
    return 1;
  }
  engine::WorkflowRegistry r;
  r.add("ingest", [](engine::WorkflowContext&, engine::Json in) { return in.size(); });
  engine::EngineConfig config;
  config.profile = engine::Profile::kDev;
  config.pool_size = 32;
  auto engine = engine::Engine::open(config, std::move(r), {connector_migrations()});
  if (!engine) {
    fmt::print(stderr, "{}\n", engine.error().message);
    return 1;
  }
  fmt::print("SQS endpoint {}, {} messages per case, ~1 KB bodies\n", (*client)->endpoint(), n);
  fmt::print("{:<42} {:>7} {:>9} {:>8} {:>8} {:>8}\n", "case", "msgs", "msgs/s", "p50 ms", "p99 ms",
             "RSS MiB");

  const std::string run = std::to_string(std::time(nullptr));
  double loop_rate = 0;  // the plain receive+delete loop: the ceiling
  // Baseline: receive 10, delete 10, repeat; no harvest involved. Latency
  // column: one receive + delete round trip.
  {
    auto q = filled_queue(**client, "bench-raw-" + run, n);
    if (!q) {
      fmt::print(stderr, "{}\n", q.error().describe());
      return 1;
    }
    fmt::print("{:<42} {:>7} {:>9.0f}\n", "SendMessageBatch (pre-fill)", n, q->second);
    size_t drained = 0;
    std::vector<double> lat;
    auto t0 = SteadyClock::now();
    while (drained < static_cast<size_t>(n)) {
      auto t = SteadyClock::now();
      auto got = (*client)->receive_message(
          {.queue_url = q->first, .max_messages = 10, .wait_time_secs = 1});
      if (!got) {
        fmt::print(stderr, "{}\n", got.error().describe());
        return 1;
      }
      std::vector<sqs::ReceiptEntry> entries;
      for (size_t i = 0; i < got->size(); ++i)
        entries.push_back({std::to_string(i), (*got)[i].receipt_handle});
      if (!entries.empty()) {
        if (auto d = (*client)->delete_message_batch(q->first, entries); !d) {
          fmt::print(stderr, "{}\n", d.error().describe());
          return 1;
        }
      }
      drained += got->size();
      lat.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - t).count());
    }
    const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    print_row("raw receive+delete, no harvest", drained, secs, lat);
    loop_rate = drained / secs;
    bench::result_line("sqs_loop", loop_rate, loop_rate, lat, bench::rss_mib());
    (void)(*client)->delete_queue(q->first);  // best effort: a bench leaves no queues behind
  }

  struct Variant {
    size_t max_batch;
    bool ahead;
  };
  for (const auto [max_batch, ahead] :
       {Variant{10, true}, Variant{10, false}, Variant{100, true}}) {
    const std::string name = fmt::format("bench-sqs-{}-{}-{}", max_batch, ahead, run);
    auto q = filled_queue(**client, name, n);
    if (!q) {
      fmt::print(stderr, "{}\n", q.error().describe());
      return 1;
    }
    auto metrics = std::make_shared<metrics::RecordingMetrics>();
    auto binding = std::make_shared<SourceBinding>(SourceBinding::starts(name, "events", "ingest"));
    binding->map_json([](const MessageCtx&, engine::Json j) -> MapResult {
      return MappedMessage{j.at("id").get<std::string>(), j};
    });
    binding->max_in_flight(16);
    auto source = std::make_shared<sqs::SqsSource>(
        *client,
        sqs::SqsSourceConfig(q->first).stream("events").visibility_timeout_secs(60).receive_ahead(
            ahead));
    ConnectorRuntime rt(binding, source, **engine, metrics, IdempotencyMode::kAuto,
                        ConnectorRuntimeConfig{.max_batch = max_batch});
    rt.with_dead_letter_sink(std::make_shared<RecordingDeadLetterSink>());
    size_t acked = 0;
    auto pg = store::Connection::open((*engine)->database_url());
    if (!pg) {
      fmt::print(stderr, "{}\n", pg.error().describe());
      return 1;
    }
    const auto footprint = bench::Footprint::begin(**pg);
    auto t0 = SteadyClock::now();
    while (acked < static_cast<size_t>(n)) {
      auto s = rt.run_once();
      if (!s) {
        fmt::print(stderr, "pass failed: {}\n", s.error().message);
        return 1;
      }
      if (s->retried || s->dead_lettered) {
        fmt::print(stderr, "{} retried, {} dead-lettered: the figures would be wrong\n", s->retried,
                   s->dead_lettered);
        return 1;
      }
      acked += s->acked;
    }
    double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
    auto lat = metrics->observations(metrics::kConnectorDispatchSeconds, {{"source", name}});
    for (auto& v : lat) v *= 1e6;  // µs for percentile_ms
    print_row(
        fmt::format("harvest, max_batch {:>3}{}", max_batch, ahead ? "" : ", receive-ahead off"),
        acked, secs, lat);
    // Not timed: one execution per message, in PostgreSQL.
    auto db = store::Connection::open((*engine)->database_url());
    auto rows = db ? (*db)->exec(
                         "SELECT count(*) AS n FROM harvest_workflow_executions WHERE "
                         "workflow_name = 'ingest' AND starts_with(workflow_id, $1)",
                         {name + "-"})
                   : fail(db.error());
    if (!rows || rows->get_int(0, "n") != n) {
      fmt::print(stderr, "executions in PostgreSQL do not match the {} messages\n", n);
      return 1;
    }
    if (max_batch == 10 && ahead) {
      bench::result_line("sqs_start", acked / secs, loop_rate, lat, bench::rss_mib(),
                         footprint.end(**pg, acked));
    }
    (void)(*client)->delete_queue(q->first);  // best effort, as above
  }
  return 0;
}
