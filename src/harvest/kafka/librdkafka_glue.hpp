// Small adapters between librdkafka's C++ API and harvest types, shared by
// the source's files (internal to the kafka module).
#pragma once

#include <fmt/format.h>
#include <librdkafka/rdkafkacpp.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/connector/event_source.hpp>

namespace harvest::kafka::detail {

// Routes a librdkafka log or error event to the harvest log, tagged `who`.
void log_librdkafka(const RdKafka::Event& event, const std::string& who);

// A global librdkafka configuration from `properties`; a rejected property
// is a config error naming the property but never its value.
Result<std::unique_ptr<RdKafka::Conf>> make_conf(
    const std::map<std::string, std::string>& properties, const std::string& who);

template <typename T>
Status set_callback(RdKafka::Conf& conf, const char* name, T* cb) {
  std::string errstr;
  if (conf.set(name, cb, errstr) != RdKafka::Conf::CONF_OK) {
    return fail(Error::internal(fmt::format("setting librdkafka {}: {}", name, errstr)));
  }
  return {};
}

// The `key=value` lines of a client properties file (the format managed
// Kafka services hand out; `#` or `!` starts a comment line, `:` also
// separates), in file order. `origin` names the file in errors, which give
// the line number but never a value (it may be a credential). Bounded:
// 64 KiB, 1,000 lines, keys of 255 bytes.
Result<std::vector<std::pair<std::string, std::string>>> parse_properties(std::string_view text,
                                                                          std::string_view origin);

// parse_properties on the file at `path`; a missing or unreadable file is a
// config error naming it.
Result<std::vector<std::pair<std::string, std::string>>> load_properties_file(
    const std::string& path);

// What one buffered message counts against a source's max_buffered_bytes.
size_t footprint(const connector::Message& m);

// A harvest message (coordinates, key, headers, payload) from a record.
connector::Message to_message(RdKafka::Message& m, const std::string& topic);

// The partitions of `topic` in a librdkafka partition list.
std::vector<int32_t> partition_ids(const std::vector<RdKafka::TopicPartition*>& tps,
                                   const std::string& topic);

}  // namespace harvest::kafka::detail
