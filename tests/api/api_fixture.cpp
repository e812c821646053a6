#include "api_fixture.hpp"

namespace harvest::testing {

void ApiTest::serve(engine::WorkflowRegistry workflows, engine::EngineConfig config,
                    api::ApiConfig api) {
  metrics_ = std::make_shared<metrics::PrometheusMetrics>();
  config.metrics = metrics_;
  engine_ = open_engine(std::move(workflows), std::move(config));
  ASSERT_TRUE(engine_);
  api.host = "127.0.0.1";
  api.port = 0;
  server_ = std::make_unique<api::HttpServer>(*engine_, std::move(api));
  auto started = server_->start();
  ASSERT_TRUE(started) << started.error().message;
  ASSERT_GT(server_->port(), 0);
}

void ApiTest::start_worker() {
  worker_ = std::make_unique<engine::Worker>(
      *engine_, engine::WorkerConfig{.concurrency = 2,
                                     .poll_interval = std::chrono::milliseconds(20),
                                     .admission_interval = std::chrono::milliseconds(20)});
  worker_->start();
}

void ApiTest::TearDown() {
  // Stop order: no new requests, no runs in progress, then the engine.
  if (server_) server_->stop();
  if (worker_) worker_->stop();
  server_.reset();
  worker_.reset();
  engine_.reset();
  PgTest::TearDown();
}

httplib::Client ApiTest::client() const {
  httplib::Client c("127.0.0.1", server_->port());
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  return c;
}

httplib::Result ApiTest::post(const std::string& path, const std::string& body,
                              const httplib::Headers& headers) {
  return client().Post(path, headers, body, "application/json");
}

httplib::Result ApiTest::get(const std::string& path) {
  return client().Get(path);
}

Json ApiTest::body(const httplib::Result& r) {
  if (!r) {
    ADD_FAILURE() << "no HTTP response: " << httplib::to_string(r.error());
    return Json();
  }
  try {
    return Json::parse(r->body);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "response body is not JSON (" << e.what() << "): " << r->body;
    return Json();
  }
}

bool ApiTest::wait_status(const std::string& execution_id, const std::string& status) {
  return eventually([&] {
    auto r = get(std::string(kPrefix) + "/executions/" + execution_id);
    return r && r->status == 200 && Json::parse(r->body).value("status", "") == status;
  });
}

}  // namespace harvest::testing
