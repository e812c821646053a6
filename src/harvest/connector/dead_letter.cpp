#include <fmt/format.h>
#include <libpq-fe.h>

#include <harvest/common/ids.hpp>
#include <harvest/common/log.hpp>
#include <harvest/connector/coordinates.hpp>
#include <harvest/connector/dead_letter.hpp>
#include <harvest/connector/sql/dead_letters.hpp>
#include <harvest/store/pg.hpp>
#include <harvest/store/pool.hpp>

harvest::store::MigrationSet harvest_migrations_connector();

namespace harvest::connector {

store::MigrationSet connector_migrations() {
  return harvest_migrations_connector();
}

namespace {

// The structured coordinates a row stores: the letter's own, or — for a
// letter that carries only the rendered form — its exact inverse when it
// reads as one; otherwise none (and a replay of the row is refused).
store::Param structured_coordinates(const DeadLetter& l) {
  Json j = l.coordinates_structured;
  if (j.is_null()) {
    if (auto parsed = parse_rendered(l.coordinates)) j = coordinates_json(*parsed);
  }
  if (j.is_null()) return store::Param{};
  return store::Param{j.dump(-1, ' ', false, Json::error_handler_t::replace)};
}

// bytea hex input form: the raw payload survives byte for byte, NULs included.
std::string bytea_hex(const std::string& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

// The stored headers (migration connector_0004): names as text, values as hex so any
// bytes survive; bounded by kMaxStoredHeaders / kMaxStoredHeaderBytes.
store::Param stored_headers(const DeadLetter& l) {
  if (l.headers.empty()) return store::Param{};
  Json out = Json::array();
  size_t bytes = 0;
  for (const auto& [name, value] : l.headers) {
    bytes += name.size() + value.size();
    if (out.size() == kMaxStoredHeaders || bytes > kMaxStoredHeaderBytes) break;
    out.push_back(Json{{"name", to_valid_utf8(name)}, {"value_hex", bytea_hex(value).substr(2)}});
  }
  return store::Param{out.dump()};
}

}  // namespace

// One row per dedupe key: a redelivery of a dead-lettered message writes
// nothing. A different record under the same key — a reused position of a
// recreated topic, told apart by its fingerprint — gets a row of its own,
// under the key with its fingerprint appended (which no derived key ends in),
// so its raw payload is never dropped. The insert's `taken`: the fingerprint
// of the row already holding the key when there is one, compared only on a
// conflict.
Status PostgresDeadLetterSink::write(const DeadLetter& l) {
  auto conn = pool_.acquire();
  if (!conn) return fail(conn.error());
  auto insert = [&](const std::string& key) {
    // Text columns must be UTF-8; the raw bytes are kept intact in `payload`.
    return (*conn)->exec(
        sql::dead_letters::insert,
        {to_valid_utf8(l.binding), to_valid_utf8(l.stream), to_valid_utf8(l.coordinates), key,
         l.reason, to_valid_utf8(l.detail), std::to_string(l.attempts), bytea_hex(l.payload),
         structured_coordinates(l), l.key ? store::Param{bytea_hex(*l.key)} : store::Param{},
         stored_headers(l),
         l.fingerprint ? store::Param{std::to_string(*l.fingerprint)} : store::Param{}});
  };
  auto r = insert(l.idempotency_key);
  if (!r) return fail(r.error());
  const auto taken = r->get_opt(0, "taken");
  if (r->get(0, "written") == "0" && l.fingerprint && taken &&
      *taken != std::to_string(*l.fingerprint)) {
    auto again = insert(
        fmt::format("{}#fp:{:016x}", l.idempotency_key, static_cast<uint64_t>(*l.fingerprint)));
    if (!again) return fail(again.error());
  }
  return {};
}

Status RecordingDeadLetterSink::write(const DeadLetter& letter) {
  std::lock_guard lock(mu_);
  if (fail_) return fail(Error::transient_error("recording sink told to fail"));
  // As the table keeps them: one letter per key, and a different record
  // under a taken key (another fingerprint) under the key with its
  // fingerprint appended.
  DeadLetter kept = letter;
  for (const auto& l : letters_) {
    if (l.idempotency_key != letter.idempotency_key) continue;
    if (!letter.fingerprint || !l.fingerprint || *l.fingerprint == *letter.fingerprint) return {};
    kept.idempotency_key = fmt::format("{}#fp:{:016x}", letter.idempotency_key,
                                       static_cast<uint64_t>(*letter.fingerprint));
  }
  for (const auto& l : letters_) {
    if (l.idempotency_key == kept.idempotency_key) return {};
  }
  letters_.push_back(std::move(kept));
  return {};
}

std::vector<DeadLetter> RecordingDeadLetterSink::letters() const {
  std::lock_guard lock(mu_);
  return letters_;
}

void RecordingDeadLetterSink::fail_writes(bool fail) {
  std::lock_guard lock(mu_);
  fail_ = fail;
}

Status UnconfiguredDeadLetterSink::write(const DeadLetter& letter) {
  std::string msg = fmt::format(
      "connector binding '{}' has no dead-letter sink configured, so poison message {} ({}) "
      "stays on the broker unacked. Either give the runtime a sink with "
      "with_dead_letter_sink(...) (the plugin wires the harvest table for you), or let the "
      "broker's own redrive policy own poison with broker_native_dead_letter()",
      binding_, letter.coordinates, letter.reason);
  log::error("{}", msg);
  return fail(Error::config(msg));
}

}  // namespace harvest::connector
