#include <fstream>

#include <harvest/common/log.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka::detail {

namespace {
constexpr size_t kMaxPropertiesBytes = 64 * 1024;
constexpr size_t kMaxPropertiesLines = 1000;
constexpr size_t kMaxPropertyKey = 255;

std::string_view trim_blank(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}
}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> parse_properties(std::string_view text,
                                                                          std::string_view origin) {
  if (text.size() > kMaxPropertiesBytes) {
    return fail(
        Error::config(fmt::format("{}: larger than {} bytes", origin, kMaxPropertiesBytes)));
  }
  std::vector<std::pair<std::string, std::string>> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = trim_blank(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (++line_no > kMaxPropertiesLines) {
      return fail(
          Error::config(fmt::format("{}: more than {} lines", origin, kMaxPropertiesLines)));
    }
    if (line.empty() || line.front() == '#' || line.front() == '!') continue;
    const size_t sep = line.find_first_of("=:");
    const std::string_view key =
        trim_blank(line.substr(0, sep == std::string_view::npos ? line.size() : sep));
    if (sep == std::string_view::npos || key.empty()) {
      return fail(Error::config(fmt::format("{}: line {}: expected key=value", origin, line_no)));
    }
    if (key.size() > kMaxPropertyKey) {
      return fail(Error::config(fmt::format("{}: line {}: a key longer than {} bytes", origin,
                                            line_no, kMaxPropertyKey)));
    }
    out.emplace_back(std::string(key), std::string(trim_blank(line.substr(sep + 1))));
  }
  return out;
}

Result<std::vector<std::pair<std::string, std::string>>> load_properties_file(
    const std::string& path) {
  const std::string origin = fmt::format("the Kafka properties file '{}'", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::config(origin + ": cannot be read"));
  std::string text(kMaxPropertiesBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_properties(text, origin);
}

void log_librdkafka(const RdKafka::Event& event, const std::string& who) {
  switch (event.type()) {
    case RdKafka::Event::EVENT_LOG: {
      const auto sev = event.severity();
      if (sev <= RdKafka::Event::EVENT_SEVERITY_ERROR) {
        log::error("librdkafka {} {}: {}", who, event.fac(), event.str());
      } else if (sev == RdKafka::Event::EVENT_SEVERITY_WARNING) {
        log::warn("librdkafka {} {}: {}", who, event.fac(), event.str());
      } else if (sev <= RdKafka::Event::EVENT_SEVERITY_INFO) {
        log::info("librdkafka {} {}: {}", who, event.fac(), event.str());
      } else {
        log::debug("librdkafka {} {}: {}", who, event.fac(), event.str());
      }
      break;
    }
    case RdKafka::Event::EVENT_ERROR:
      log::warn("librdkafka {}: {}: {}", who, RdKafka::err2str(event.err()), event.str());
      break;
    default:
      break;
  }
}

Result<std::unique_ptr<RdKafka::Conf>> make_conf(
    const std::map<std::string, std::string>& properties, const std::string& who) {
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  std::string errstr;
  for (const auto& [key, value] : properties) {
    // The value is left out of the message: it may be a credential.
    if (conf->set(key, value, errstr) != RdKafka::Conf::CONF_OK) {
      return fail(Error::config(
          fmt::format("{}: librdkafka rejected property '{}': {}", who, key, errstr)));
    }
  }
  return conf;
}

connector::Message to_message(RdKafka::Message& m, const std::string& topic) {
  connector::Message out;
  out.coordinates = connector::KafkaCoordinates{topic, m.partition(), m.offset()};
  if (m.key_pointer() != nullptr) {
    out.key.emplace(static_cast<const char*>(m.key_pointer()), m.key_len());
  }
  if (RdKafka::Headers* headers = m.headers(); headers != nullptr) {
    for (const auto& h : headers->get_all()) {
      out.headers.emplace_back(
          h.key(), h.value() != nullptr
                       ? std::string(static_cast<const char*>(h.value()), h.value_size())
                       : std::string());
    }
  }
  if (m.payload() != nullptr) out.payload.assign(static_cast<const char*>(m.payload()), m.len());
  if (const RdKafka::MessageTimestamp ts = m.timestamp();
      ts.type != RdKafka::MessageTimestamp::MSG_TIMESTAMP_NOT_AVAILABLE) {
    out.timestamp_ms = ts.timestamp;
  }
  return out;
}

std::vector<int32_t> partition_ids(const std::vector<RdKafka::TopicPartition*>& tps,
                                   const std::string& topic) {
  std::vector<int32_t> out;
  for (const auto* tp : tps) {
    if (tp->topic() == topic) out.push_back(tp->partition());
  }
  return out;
}

size_t footprint(const connector::Message& m) {
  size_t n = m.payload.size() + (m.key ? m.key->size() : 0) + 64;
  for (const auto& [k, v] : m.headers) n += k.size() + v.size();
  return n;
}

}  // namespace harvest::kafka::detail
