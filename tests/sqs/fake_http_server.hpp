// Test support: a local HTTP server (cpp-httplib) on 127.0.0.1 standing in
// for IMDS, the container credentials endpoint, STS or an SQS endpoint in
// unit tests. Routes are registered by the constructor's callback, before the
// server starts listening; it listens from construction until destruction.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace harvest::sqs::testing {

class FakeHttpServer {
 public:
  explicit FakeHttpServer(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    // Runs on the handler's thread after every route handler, before the
    // response is written: see sync().
    server_.set_post_routing_handler(
        [this](const httplib::Request&, httplib::Response&) { std::lock_guard lock(mu_); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("FakeHttpServer: cannot bind 127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // The socket already accepts connections (they queue in the backlog);
    // wait for the accept loop only so that stop() in the destructor cannot
    // run before listening starts and leave the thread listening forever.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  }
  ~FakeHttpServer() {
    server_.stop();
    thread_.join();
  }
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;

  // Orders what the handlers did for every response received so far before
  // what the caller does next. Handlers run on the server's threads, and a
  // response arriving over a socket is no ordering ThreadSanitizer can see;
  // a test reads what its handlers recorded after calling this.
  void sync() const { std::lock_guard lock(mu_); }

  [[nodiscard]] int port() const { return port_; }
  // "http://127.0.0.1:<port>" followed by `path`.
  [[nodiscard]] std::string url(const std::string& path = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  httplib::Server server_;
  mutable std::mutex mu_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace harvest::sqs::testing
