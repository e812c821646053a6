// The console's queries at production size (issue 33): fills
// $HARVEST_DATABASE_URL (a fresh database) with EXECUTIONS runs (default
// 1,000,000: three workflows, every status, workflow ids, broker
// coordinates, creation times over a week, a history for one run in ten) and
// DEAD_LETTERS connector dead letters (default 100,000), serves the HTTP API,
// and times every request the console's pages make, as a browser would send
// it. Prints one line per query:
//   RESULT case=console_<query> p50_ms=<> max_ms=<> rows=<items answered>
// The target is every list and detail query at or under 50 ms.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include <harvest/api/http_server.hpp>
#include <harvest/engine/engine.hpp>
#include <harvest/plugin/migrations.hpp>
#include <harvest/store/pg.hpp>

using namespace harvest;

namespace {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

bool exec(store::Connection& c, const std::string& sql) {
  auto r = c.exec(sql);
  if (!r) fmt::print(stderr, "error: {}\n", r.error().message);
  return static_cast<bool>(r);
}

}  // namespace

int main() {
  const long executions = env_long("EXECUTIONS", 1'000'000);
  const long dead_letters = env_long("DEAD_LETTERS", 100'000);
  const char* url = std::getenv("HARVEST_DATABASE_URL");
  if (!url) {
    fmt::print(stderr, "set HARVEST_DATABASE_URL\n");
    return 2;
  }
  engine::WorkflowRegistry workflows;
  for (const char* w : {"fulfil_order", "refund", "reconcile"}) {
    workflows.add(w, [](engine::WorkflowContext&, engine::Json in) { return in; });
  }
  engine::EngineConfig config;
  config.database_url = url;
  config.profile = engine::Profile::kDev;
  auto engine = engine::Engine::open(config, std::move(workflows), plugin::all_migration_sets());
  if (!engine) {
    fmt::print(stderr, "error: {}\n", engine.error().message);
    return 1;
  }
  auto conn = store::Connection::open(url);
  if (!conn) {
    fmt::print(stderr, "error: {}\n", conn.error().message);
    return 1;
  }
  store::Connection& c = **conn;
  const auto fill_start = std::chrono::steady_clock::now();
  // Generated in SQL, in batches of 100,000 so no statement holds a huge
  // snapshot; statuses cycle so that most runs are closed, as in production.
  for (long from = 0; from < executions; from += 100'000) {
    const long to = std::min(executions, from + 100'000) - 1;
    if (!exec(c, fmt::format(
                     "INSERT INTO harvest_workflow_executions (id, workflow_name, workflow_id, "
                     "status, input, output, start_source, start_source_ref, created_at, "
                     "completed_at, run_after) "
                     "SELECT gen_random_uuid(), (ARRAY['fulfil_order','refund','reconcile'])[1 + "
                     "i % 3], 'order-' || i, s.status, jsonb_build_object('order_id', i, "
                     "'total_cents', i % 10000), CASE WHEN s.status = 'completed' THEN "
                     "jsonb_build_object('ok', true) END, 'broker', 'orders.placed:' || (i % 8) "
                     "|| ':' || (i / 8), t.at, CASE WHEN s.status IN ('completed','failed',"
                     "'cancelled','terminated') THEN t.at + interval '40 ms' END, t.at "
                     "FROM generate_series({}, {}) i, "
                     "LATERAL (SELECT (ARRAY['completed','completed','completed','completed',"
                     "'completed','completed','completed','failed','waiting','cancelled'])"
                     "[1 + i % 10] AS status) s, "
                     "LATERAL (SELECT now() - interval '7 days' + (i::double precision / {}) * "
                     "interval '7 days' AS at) t",
                     from, to, executions))) {
      return 1;
    }
  }
  if (!exec(c,
            "INSERT INTO harvest_workflow_events (execution_id, op_seq, kind, name, payload) "
            "SELECT e.id, k.op, k.kind, k.name, k.payload FROM (SELECT id FROM "
            "harvest_workflow_executions TABLESAMPLE SYSTEM (10)) e, (VALUES (0, "
            "'StepCompleted', 'reserve', '1'::jsonb), (1, 'StepCompleted', 'charge', '1'::jsonb), "
            "(NULL::int, 'WorkflowCompleted', NULL, NULL)) AS k(op, kind, name, payload)")) {
    return 1;
  }
  if (!exec(c, fmt::format("INSERT INTO harvest_connector_dead_letters (binding, stream, "
                           "coordinates, idempotency_key, reason, detail, attempts, payload, "
                           "failed_at) SELECT (ARRAY['orders','refunds'])[1 + i % 2], "
                           "'orders.placed', 'orders.placed:' || (i % 8) || ':' || (i / 8), "
                           "'k' || i, (ARRAY['undecodable','mapping_rejected','start_rejected'])"
                           "[1 + i % 3], 'malformed JSON at byte 2', 1, convert_to(repeat('x', "
                           "200 + i % 300), 'UTF8'), now() - (i || ' seconds')::interval "
                           "FROM generate_series(1, {}) i",
                           dead_letters)) ||
      !exec(c,
            "INSERT INTO harvest_engine_dead_letters (execution_id, workflow_name, workflow_id, "
            "error, attempts, failed_at) SELECT id, workflow_name, workflow_id, 'boom', 3, "
            "completed_at FROM harvest_workflow_executions WHERE status = 'failed'") ||
      // 40 of the waiting runs are held by a worker (shown as running);
      // no run is pending or terminated: the rarest filters.
      !exec(c,
            "INSERT INTO harvest_run_leases (execution_id, workflow_name, lease_owner, "
            "lease_expires_at) SELECT id, workflow_name, 'bench/' || id, now() + interval '1 "
            "hour' FROM harvest_workflow_executions WHERE status = 'waiting' LIMIT 40") ||
      !exec(c, "VACUUM ANALYZE")) {
    return 1;
  }
  const double fill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_start).count();
  fmt::print("bench: {} executions, {} connector dead letters filled in {:.0f} s\n", executions,
             dead_letters, fill_s);

  api::ApiConfig api;
  api.port = 0;
  api::HttpServer server(**engine, api);
  if (auto ok = server.start(); !ok) {
    fmt::print(stderr, "error: {}\n", ok.error().message);
    return 1;
  }
  httplib::Client client("127.0.0.1", server.port());
  client.set_keep_alive(true);
  auto text = [&](const std::string& sql) {
    auto r = c.exec(sql);
    return r && !r->empty() ? r->get(0, 0) : std::string();
  };
  const std::string recent = text(
      "SELECT id FROM harvest_workflow_executions e WHERE EXISTS (SELECT 1 FROM "
      "harvest_workflow_events v WHERE v.execution_id = e.id) ORDER BY created_at DESC LIMIT 1");
  const std::string old_id =
      text("SELECT id FROM harvest_workflow_executions ORDER BY created_at LIMIT 1");
  const std::string dead = text("SELECT id FROM harvest_connector_dead_letters LIMIT 1");
  const std::string cursor_probe = text(
      "SELECT (extract(epoch FROM created_at) * 1000000)::bigint || '|' || id FROM "
      "harvest_workflow_executions ORDER BY created_at DESC, id DESC OFFSET 500000 LIMIT 1");
  const std::string p = "/api/harvest";
  // Second pages of the two dead-letter lists, by the cursor the first names.
  auto next_cursor = [&](const std::string& target) {
    auto r = client.Get(target);
    if (!r || r->status != 200) return std::string();
    auto j = nlohmann::json::parse(r->body);
    return j["next_cursor"].is_string()
               ? httplib::detail::encode_query_param(j["next_cursor"].get<std::string>())
               : std::string();
  };
  const std::string dlq_cursor = next_cursor(p + "/connector-dead-letters?limit=500");
  const std::string dead_cursor = next_cursor(p + "/dead-letters?limit=100");
  // The first overview after start counts while it waits (about 200 ms at a
  // million runs); every later one is answered from the background count.
  (void)client.Get(p + "/overview");
  std::vector<std::pair<std::string, std::string>> queries = {
      {"overview", p + "/overview"},
      {"connectors", p + "/connectors"},
      {"executions_newest", p + "/executions?limit=50"},
      {"executions_deep_page", p + "/executions?limit=50&cursor=" + cursor_probe},
      {"executions_workflow_status", p + "/executions?workflow=refund&status=failed&limit=50"},
      {"executions_status_pending", p + "/executions?status=pending&limit=50"},
      {"executions_status_running", p + "/executions?status=running&limit=50"},
      {"executions_status_waiting", p + "/executions?status=waiting&limit=50"},
      {"executions_status_completed", p + "/executions?status=completed&limit=50"},
      {"executions_status_failed", p + "/executions?status=failed&limit=50"},
      {"executions_status_cancelled", p + "/executions?status=cancelled&limit=50"},
      {"executions_status_terminated", p + "/executions?status=terminated&limit=50"},
      {"executions_workflow_status_running",
       p + "/executions?workflow=refund&status=running&limit=50"},
      {"executions_workflow_id", p + "/executions?workflow_id=order-777777&limit=50"},
      {"executions_workflow_id_prefix", p + "/executions?workflow_id_prefix=order-99999&limit=50"},
      {"executions_coordinates", p + "/executions?source_ref=orders.placed:3:12345&limit=50"},
      {"executions_time_range",
       p + "/executions?since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z&limit=50"},
      {"execution_recent", p + "/executions/" + recent},
      {"execution_oldest", p + "/executions/" + old_id},
      {"connector_dead_letters", p + "/connector-dead-letters?limit=50"},
      {"connector_dead_letters_binding_reason",
       p + "/connector-dead-letters?binding=refunds&reason=undecodable&limit=50"},
      {"connector_dead_letters_stream_time",
       p + "/connector-dead-letters?stream=orders.placed&since=2000-01-01T00:00:00Z&limit=50"},
      {"connector_dead_letter", p + "/connector-dead-letters/" + dead},
      {"dead_letters", p + "/dead-letters?limit=100"},
      {"dead_letters_next_page", p + "/dead-letters?limit=100&cursor=" + dead_cursor},
      {"connector_dead_letters_next_page",
       p + "/connector-dead-letters?limit=500&cursor=" + dlq_cursor},
  };
  int over = 0;
  // The overview's counts are shared for 2 s; a window of its own per
  // request measures the count itself.
  queries.emplace_back("overview_count", p + "/overview?window_seconds=");
  for (const auto& [name, target] : queries) {
    std::vector<double> ms;
    size_t rows = 0;
    for (int i = 0; i < 7; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = client.Get(target.ends_with("=") ? target + std::to_string(100 + i) : target);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!r || r->status != 200) {
        fmt::print(stderr, "error: {} answered {}\n", name, r ? r->status : -1);
        return 1;
      }
      auto j = nlohmann::json::parse(r->body);
      rows = j.contains("items") ? j["items"].size() : 1;
    }
    std::sort(ms.begin(), ms.end());
    if (ms[ms.size() / 2] > 50) ++over;
    fmt::print("RESULT case=console_{} p50_ms={:.1f} max_ms={:.1f} rows={}\n", name,
               ms[ms.size() / 2], ms.back(), rows);
  }
  fmt::print("bench: {} of {} console queries over 50 ms at the median\n", over, queries.size());
  server.stop();
  return 0;
}
