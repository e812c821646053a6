// Test support for the HTTP API: an engine over the test's own database, an
// HttpServer on an ephemeral loopback port, and JSON helpers over a real
// httplib::Client.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "support/pg_fixture.hpp"
#include <harvest/api/http_server.hpp>
#include <harvest/engine/worker.hpp>
#include <harvest/metrics/prometheus.hpp>

namespace harvest::testing {

using Json = nlohmann::json;

class ApiTest : public PgTest {
 protected:
  static constexpr const char* kPrefix = "/api/harvest";

  // Opens the engine (recording into a PrometheusMetrics) and serves the API.
  void serve(engine::WorkflowRegistry workflows, engine::EngineConfig config = {},
             api::ApiConfig api = {});
  // Starts a worker pool over the engine (for tests whose runs must execute).
  void start_worker();
  void TearDown() override;

  // A fresh client to the server (one connection unless keep-alive is on).
  [[nodiscard]] httplib::Client client() const;
  httplib::Result post(const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {});
  httplib::Result post(const std::string& path, const Json& body,
                       const httplib::Headers& headers = {}) {
    return post(path, body.dump(), headers);
  }
  httplib::Result post(const std::string& path, const char* body,
                       const httplib::Headers& headers = {}) {
    return post(path, std::string(body), headers);
  }
  httplib::Result get(const std::string& path);
  // The response body as JSON; fails the test on an unparsable body.
  static Json body(const httplib::Result& r);
  // Polls GET execution until its status is `status` (20 s deadline).
  bool wait_status(const std::string& execution_id, const std::string& status);

  std::shared_ptr<metrics::PrometheusMetrics> metrics_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Worker> worker_;
  std::unique_ptr<api::HttpServer> server_;
};

}  // namespace harvest::testing
