#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include <harvest/common/strings.hpp>
#include <harvest/kafka/kafka_source_config.hpp>

namespace harvest::kafka {
namespace {

constexpr const char* kBootstrap = "bootstrap.servers";
constexpr const char* kGroup = "group.id";

std::string normalise_key(std::string key) {
  // librdkafka treats these as one property; keeping one spelling means the
  // identity and the forced settings cannot be sidestepped by the alias.
  if (key == "metadata.broker.list") return kBootstrap;
  return key;
}

// One seed entry, `host[:port]`, optionally behind a `proto://` prefix
// (librdkafka accepts e.g. `PLAINTEXT://host:port`).
std::string canonical_entry(std::string entry) {
  entry = ascii_lower(entry);
  std::string scheme;
  if (auto pos = entry.find("://"); pos != std::string::npos) {
    scheme = entry.substr(0, pos + 3);
    entry = entry.substr(pos + 3);
  }
  std::string host = entry;
  std::string port;
  if (!entry.empty() && entry.front() == '[') {
    // [v6::addr]:port
    const auto close = entry.find(']');
    if (close != std::string::npos) {
      host = entry.substr(0, close + 1);
      if (close + 1 < entry.size() && entry[close + 1] == ':') port = entry.substr(close + 2);
    }
  } else if (std::count(entry.begin(), entry.end(), ':') == 1) {
    const auto colon = entry.find(':');
    host = entry.substr(0, colon);
    port = entry.substr(colon + 1);
  }
  if (port.empty()) port = "9092";
  return scheme + host + ":" + port;
}

}  // namespace

KafkaSourceConfig::KafkaSourceConfig(std::string brokers, std::string group, std::string topic)
    : brokers_(std::move(brokers)), group_(std::move(group)), topic_(std::move(topic)) {}

KafkaSourceConfig& KafkaSourceConfig::property(std::string key, std::string value) & {
  key = normalise_key(std::move(key));
  auto it = std::find_if(properties_.begin(), properties_.end(),
                         [&](const auto& kv) { return kv.first == key; });
  if (it != properties_.end()) {
    it->second = std::move(value);
  } else {
    properties_.emplace_back(std::move(key), std::move(value));
  }
  return *this;
}

KafkaSourceConfig&& KafkaSourceConfig::property(std::string key, std::string value) && {
  return std::move(property(std::move(key), std::move(value)));
}

KafkaSourceConfig& KafkaSourceConfig::max_buffered(size_t n) & {
  max_buffered_ = std::max<size_t>(n, 1);
  return *this;
}
KafkaSourceConfig&& KafkaSourceConfig::max_buffered(size_t n) && {
  return std::move(max_buffered(n));
}

KafkaSourceConfig& KafkaSourceConfig::max_buffered_bytes(size_t n) & {
  max_buffered_bytes_ = std::max<size_t>(n, 1);
  return *this;
}

KafkaSourceConfig&& KafkaSourceConfig::max_buffered_bytes(size_t n) && {
  return std::move(max_buffered_bytes(n));
}
KafkaSourceConfig& KafkaSourceConfig::sync_timeout(std::chrono::milliseconds t) & {
  sync_timeout_ = t;
  return *this;
}
KafkaSourceConfig&& KafkaSourceConfig::sync_timeout(std::chrono::milliseconds t) && {
  return std::move(sync_timeout(t));
}
KafkaSourceConfig& KafkaSourceConfig::close_timeout(std::chrono::milliseconds t) & {
  close_timeout_ = t;
  return *this;
}
KafkaSourceConfig&& KafkaSourceConfig::close_timeout(std::chrono::milliseconds t) && {
  return std::move(close_timeout(t));
}

KafkaSourceConfig& KafkaSourceConfig::instance_id(std::string id) & {
  instance_id_ = std::move(id);
  return *this;
}
KafkaSourceConfig&& KafkaSourceConfig::instance_id(std::string id) && {
  return std::move(instance_id(std::move(id)));
}

std::string KafkaSourceConfig::effective_instance_id() const {
  if (instance_id_) return *instance_id_;
  const char* env = std::getenv("HARVEST_INSTANCE_ID");
  return env ? env : "";
}

std::map<std::string, std::string> KafkaSourceConfig::effective_properties() const {
  std::map<std::string, std::string> out;
  out[kBootstrap] = brokers_;
  out[kGroup] = group_;
  // harvest's default is earliest (librdkafka's is latest): a new binding
  // starts from the beginning of the topic unless the caller chooses the tail.
  // A default, not a forced setting: `.property("auto.offset.reset", …)` wins.
  out["auto.offset.reset"] = "earliest";
  // 10 s, not librdkafka's 45 s: a crashed member's partitions move to the
  // others (and a rebalance stops waiting for it) within 10 s. Heartbeats run
  // on librdkafka's own thread, so a busy dispatch does not miss them; the
  // broker's floor (group.min.session.timeout.ms) is 6 s.
  out["session.timeout.ms"] = "10000";
  // 10 s, not librdkafka's 60 s: a request a broker never answers (a frozen
  // or half-dead process) is failed and its connection rebuilt after this,
  // and closing a consumer waits for its outstanding requests, so this is
  // also what a close against such a broker costs beyond close_timeout.
  out["socket.timeout.ms"] = "10000";
  // A restarted broker is reconnected to within 2 s of it answering again;
  // librdkafka's backoff grows to 10 s, which alone could keep a consumer
  // idle for 10 s after the broker was back (the Java client caps it at 1 s).
  out["reconnect.backoff.max.ms"] = "2000";
  // librdkafka's prefetch sits in front of the read-ahead (max_buffered_bytes)
  // and is memory the process holds too: its defaults (64 MiB, 100,000
  // messages) doubled a backlog drain's footprint for no throughput, since
  // the read-ahead already covers seconds of dispatch. Defaults, not forced.
  out["queued.max.messages.kbytes"] = "16384";
  out["queued.min.messages"] = "10000";
  // Static membership: one member id per process and topic, so the same
  // process coming back is recognised as the member that left.
  if (const std::string id = effective_instance_id(); !id.empty()) {
    out["group.instance.id"] = id + "." + topic_;
  }
  for (const auto& [k, v] : properties_) out[k] = v;
  // Auto-commit would commit offsets the runtime never vouched for, breaking
  // ack-after-commit unconditionally; auto offset store is its feeder. We
  // commit explicit offsets only.
  out["enable.auto.commit"] = "false";
  out["enable.auto.offset.store"] = "false";
  return out;
}

std::string KafkaSourceConfig::effective_brokers() const {
  return effective_properties().at(kBootstrap);
}

std::string KafkaSourceConfig::effective_group() const {
  return effective_properties().at(kGroup);
}

OffsetReset KafkaSourceConfig::offset_reset() const {
  const auto props = effective_properties();
  auto it = props.find("auto.offset.reset");
  if (it == props.end()) return OffsetReset::kEarliest;
  const std::string v = ascii_lower(trim(std::string_view(it->second)));
  if (v == "smallest" || v == "earliest" || v == "beginning") return OffsetReset::kEarliest;
  if (v == "error") return OffsetReset::kError;
  return OffsetReset::kLatest;
}

std::string canonical_bootstrap(const std::string& brokers) {
  std::set<std::string> entries;
  for (auto& entry : split_list(brokers)) entries.insert(canonical_entry(std::move(entry)));
  std::string out;
  for (const auto& e : entries) {
    if (!out.empty()) out += ',';
    out += e;
  }
  return out;
}

std::string subscription_identity(const KafkaSourceConfig& config) {
  const nlohmann::json parts = {canonical_bootstrap(config.effective_brokers()),
                                config.effective_group(), config.topic()};
  return "kafka:" + parts.dump();
}

}  // namespace harvest::kafka
