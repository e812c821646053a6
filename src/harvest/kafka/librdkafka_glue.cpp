#include <harvest/common/log.hpp>
#include <harvest/kafka/librdkafka_glue.hpp>

namespace harvest::kafka::detail {

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

}  // namespace harvest::kafka::detail
