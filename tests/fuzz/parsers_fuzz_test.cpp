// Fuzzing: the parsers under generated input. Each seed in
// tests/fuzz/corpus is mutated (bit flips, inserted tokens, deleted,
// duplicated and truncated ranges) for a bounded time, and fed to the JSON
// reader every payload and body goes through, to the request-target parser,
// and — as raw bytes over a socket — to the running HTTP server. Built with
// ASan and UBSan (the dev preset), a memory error fails the run; the checks
// here are that every input gets an answer within the limits and that the
// server is alive at the end. The seed is printed so a failure replays.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "api_fixture.hpp"
#include "raw_http.hpp"
#include <harvest/api/router.hpp>
#include <harvest/common/json.hpp>

namespace harvest {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> corpus(const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& f :
       std::filesystem::directory_iterator(std::string(HARVEST_FUZZ_CORPUS) + "/" + kind)) {
    std::ifstream in(f.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<std::string> tokens)
      : rng_(seed), tokens_(std::move(tokens)) {}

  std::string mutate(std::string s) {
    const int rounds = 1 + static_cast<int>(rng_() % 4);
    for (int r = 0; r < rounds; ++r) {
      const size_t pos = s.empty() ? 0 : rng_() % (s.size() + 1);
      switch (rng_() % 6) {
        case 0:  // flip a bit
          if (!s.empty()) s[pos % s.size()] ^= static_cast<char>(1u << (rng_() % 8));
          break;
        case 1:  // insert a token
          s.insert(pos, tokens_[rng_() % tokens_.size()]);
          break;
        case 2:  // delete a range
          s.erase(pos, rng_() % 16);
          break;
        case 3: {  // duplicate a range (deep nesting, repeated headers)
          const std::string piece = s.substr(pos, rng_() % 32);
          for (int n = static_cast<int>(rng_() % 64); n > 0; --n) s.insert(pos, piece);
          break;
        }
        case 4:  // truncate
          s.resize(pos);
          break;
        default:  // a random byte
          s.insert(pos, 1, static_cast<char>(rng_() % 256));
          break;
      }
    }
    return s;
  }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> tokens_;
};

uint64_t fresh_seed() {
  uint64_t seed = std::random_device{}();
  std::cout << "fuzz seed " << seed << "\n";
  return seed;
}

TEST(ParsersFuzz, json_reader_answers_every_input_within_its_limits) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Mutator m(seed, {"[", "]", "{", "}", "\"", "\\u0000", "\\ud800", ":", ",", "1e999", "-0", "\xff",
                   "null", "[[[[[[[[", "\"a\":", "\\"});
  const auto seeds = corpus("json");
  const JsonLimits limits{.max_depth = 128, .max_bytes = 1 << 16};
  size_t parsed = 0, refused = 0;
  const auto deadline = std::chrono::steady_clock::now() + 8s;
  for (size_t i = 0; i < 200'000 && std::chrono::steady_clock::now() < deadline; ++i) {
    const std::string input = m.mutate(seeds[i % seeds.size()]);
    auto r = parse_json(input, limits);
    if (!r) {
      ++refused;
      EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
      continue;
    }
    ++parsed;
    EXPECT_TRUE(check_json_depth(*r, limits.max_depth)) << "accepted past the depth limit";
    (void)check_json_storable(*r);
    (void)r->dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(refused, 0u);
}

TEST(ParsersFuzz, request_targets_parse_or_are_refused) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Mutator m(seed, {"%", "%2F", "%00", "%zz", "?", "&", "=", "+", "/", "//", "#", "\xff"});
  const std::vector<std::string> seeds{"/api/harvest/executions?workflow=a&limit=5",
                                       "/api/harvest/workflows/greet/start",
                                       "/api/harvest/workflows/a%20b/executions/x/signals/s"};
  for (size_t i = 0; i < 100'000 / harvest::testing::kFuzzDivisor; ++i) {
    auto t = api::parse_target(m.mutate(seeds[i % seeds.size()]));
    if (!t) {
      EXPECT_EQ(t.error().kind, ErrorKind::kBadRequest);
    }
  }
}

class HttpFuzzTest : public testing::ApiTest {};

TEST_F(HttpFuzzTest, the_server_answers_or_closes_every_mutated_request_and_stays_up) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  engine::WorkflowRegistry r;
  r.add("greet", [](engine::WorkflowContext&, Json in) { return in; });
  api::ApiConfig cfg;
  cfg.read_timeout = 1s;
  cfg.keep_alive_timeout = 1s;
  serve(std::move(r), {}, cfg);
  Mutator m(seed, {"\r\n", "\r\n\r\n", "Content-Length: 99999999999\r\n",
                   "Transfer-Encoding: chunked\r\n", "ffffffffffffffff\r\n", "Host: evil\r\n",
                   " HTTP/1.1", "\0", "Expect: 100-continue\r\n", ":", "%00", "\xff"});
  const auto seeds = testing::RawConnection(server_->port()).connected()
                         ? corpus("http")
                         : std::vector<std::string>{};
  ASSERT_FALSE(seeds.empty());
  const double rss_before = testing::rss_mib();
  size_t answered = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  size_t i = 0;
  for (; i < 3000 / harvest::testing::kFuzzDivisor && std::chrono::steady_clock::now() < deadline;
       ++i) {
    testing::RawConnection c(server_->port());
    ASSERT_TRUE(c.connected()) << "the server stopped accepting after " << i << " requests";
    c.send(m.mutate(seeds[i % seeds.size()]));
    const std::string reply = c.read_all(30ms);
    if (!reply.empty()) {
      ++answered;
      const int status = testing::status_of(reply);
      EXPECT_TRUE(status == 100 || (status >= 200 && status < 600)) << reply.substr(0, 80);
      EXPECT_EQ(reply.find("SQLSTATE"), std::string::npos) << reply.substr(0, 200);
    }
    if (i % 500 == 499) {
      auto h = get("/healthz");
      ASSERT_TRUE(h) << "no health answer after " << i + 1 << " requests";
      EXPECT_EQ(h->status, 200);
    }
  }
  std::cout << i << " mutated requests, " << answered << " answered at once\n";
  EXPECT_GT(answered, i / 4);
  auto h = get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(testing::rss_mib() - rss_before, 128.0);
}

}  // namespace
}  // namespace harvest
