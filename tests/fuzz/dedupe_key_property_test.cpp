// Property test: dedupe-key derivation is injective and bounded. Over
// 1,000,000 distinct generated message identities (binding, incarnation,
// Kafka topic/partition/offset or SQS queue/message id, with separators,
// NUL, non-UTF-8 bytes and lengths on both sides of the inline limit) every
// key is distinct, no longer than the engine's idempotency-key limit, valid
// UTF-8 and NUL-free (so PostgreSQL stores it exactly). Seeded: a failure
// prints the seed to replay.
#include <gtest/gtest.h>

#include <random>
#include <unordered_set>

#include "support/pg_fixture.hpp"
#include <harvest/common/ids.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/engine/identifiers.hpp>

namespace harvest::connector {
namespace {

struct Hash128 {
  uint64_t a, b;
  bool operator==(const Hash128&) const = default;
};
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return h.a ^ (h.b * 0x9e3779b97f4a7c15ULL); }
};
Hash128 hash128(std::string_view s) {
  uint64_t fnv = 1469598103934665603ULL;
  for (unsigned char c : s) fnv = (fnv ^ c) * 1099511628211ULL;
  return {std::hash<std::string_view>{}(s), fnv};
}

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}
  // Short strings drawn from the characters that matter most: separators,
  // digits (length prefixes), NUL and bytes that are not UTF-8.
  std::string text(size_t max_len) {
    static constexpr char kAlphabet[] = {':',  '#',    '/',    '1',    '0', '9', 'a', 'z',
                                         '\0', '\xff', '\xc3', '\xa9', '.', '-', '_', ' '};
    std::uniform_int_distribution<size_t> len(0, max_len);
    std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 1);
    std::string s(len(rng_), ' ');
    for (char& c : s) c = kAlphabet[pick(rng_)];
    return s;
  }
  Coordinates coordinates() {
    if (std::bernoulli_distribution(0.5)(rng_)) {
      return KafkaCoordinates{text(rng_() % 8 == 0 ? 260 : 12),
                              static_cast<int32_t>(rng_() % 64) - 2,
                              static_cast<int64_t>(rng_() % 100000) - 5};
    }
    return SqsCoordinates{text(rng_() % 8 == 0 ? 260 : 12), text(14), ""};
  }
  std::string binding() { return text(6); }
  std::string incarnation() { return rng_() % 4 == 0 ? text(4) : std::string(); }

 private:
  std::mt19937_64 rng_;
};

// A canonical, injective rendering of one identity, to keep generated ones distinct.
std::string identity(const std::string& b, const std::string& inc, const Coordinates& c) {
  std::string out;
  auto part = [&](std::string_view p) { out += std::to_string(p.size()) + ":" + std::string(p); };
  part(b);
  part(inc);
  if (const auto* k = std::get_if<KafkaCoordinates>(&c)) {
    part("k");
    part(k->topic);
    part(std::to_string(k->partition));
    part(std::to_string(k->offset));
  } else {
    const auto& s = std::get<SqsCoordinates>(c);
    part("s");
    part(s.queue_url);
    part(s.message_id);
  }
  return out;
}

TEST(DedupeKeyProperty, a_million_distinct_coordinates_give_a_million_distinct_storable_keys) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Generator gen(seed);
  constexpr size_t kCount = 1'000'000 / harvest::testing::kFuzzDivisor;
  std::unordered_set<Hash128, Hash128Hasher> identities, keys;
  identities.reserve(kCount);
  keys.reserve(kCount);
  size_t hashed = 0, failures = 0;
  while (identities.size() < kCount) {
    const std::string b = gen.binding(), inc = gen.incarnation();
    const Coordinates c = gen.coordinates();
    if (!identities.insert(hash128(identity(b, inc, c))).second) continue;  // seen already
    const std::string key = DedupeKey::derive(b, inc, c).value();
    hashed += key.starts_with("conn:h:");
    const bool ok = key.size() <= engine::IdentifierLimits::kIdempotencyKey &&
                    key.find('\0') == std::string::npos && is_valid_utf8(key) &&
                    key.starts_with("conn:");
    if (!ok && ++failures <= 3) ADD_FAILURE() << "unstorable key for " << identity(b, inc, c);
    if (!keys.insert(hash128(key)).second && ++failures <= 3) {
      ADD_FAILURE() << "two identities share the key " << key;
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(keys.size(), kCount);
  // Both encodings were exercised.
  EXPECT_GT(hashed, kCount / 20);
  EXPECT_LT(hashed, kCount - kCount / 20);
}

}  // namespace
}  // namespace harvest::connector
