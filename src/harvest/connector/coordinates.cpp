#include <fmt/format.h>

#include <charconv>
#include <limits>

#include <harvest/connector/coordinates.hpp>

namespace harvest::connector {

namespace {

template <typename Int>
std::optional<Int> parse_int(std::string_view s) {
  Int v{};
  if (s.empty()) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string PartitionKey::label() const {
  return fmt::format("{}[{}]", topic, partition);
}

std::optional<Position> position_of(const Coordinates& c) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&c)) {
    return Position{PartitionKey{k->topic, k->partition}, k->offset};
  }
  return std::nullopt;
}

Coordinates at_offset(Coordinates c, int64_t offset) {
  if (auto* k = std::get_if<KafkaCoordinates>(&c)) k->offset = offset;
  return c;
}

std::string render(const Coordinates& c) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&c)) {
    return fmt::format("{}:{}:{}", k->topic, k->partition, k->offset);
  }
  const auto& s = std::get<SqsCoordinates>(c);
  return fmt::format("{}#{}", s.queue_url, s.message_id);
}

Result<Coordinates> parse_rendered(std::string_view rendered) {
  if (auto hash = rendered.rfind('#'); hash != std::string_view::npos) {
    if (hash == 0 || hash + 1 == rendered.size()) {
      return fail(Error::bad_request(
          "coordinates 'queue_url#message_id' need both a queue URL and a MessageId"));
    }
    return SqsCoordinates{std::string(rendered.substr(0, hash)),
                          std::string(rendered.substr(hash + 1)), ""};
  }
  const auto last = rendered.rfind(':');
  const auto middle = last == std::string_view::npos || last == 0 ? std::string_view::npos
                                                                  : rendered.rfind(':', last - 1);
  if (middle == std::string_view::npos || middle == 0) {
    return fail(Error::bad_request(
        "coordinates are neither 'topic:partition:offset' nor 'queue_url#message_id'"));
  }
  auto partition = parse_int<int32_t>(rendered.substr(middle + 1, last - middle - 1));
  auto offset = parse_int<int64_t>(rendered.substr(last + 1));
  if (!partition || !offset || *partition < 0) {
    return fail(Error::bad_request(
        "coordinates 'topic:partition:offset' need a partition from 0 to 2^31-1 and a 64-bit "
        "offset"));
  }
  return KafkaCoordinates{std::string(rendered.substr(0, middle)), *partition, *offset};
}

Json coordinates_json(const Coordinates& c) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&c)) {
    return Json{
        {"kind", "kafka"}, {"topic", k->topic}, {"partition", k->partition}, {"offset", k->offset}};
  }
  const auto& s = std::get<SqsCoordinates>(c);
  return Json{{"kind", "sqs"}, {"queue_url", s.queue_url}, {"message_id", s.message_id}};
}

Result<Coordinates> coordinates_from_json(const Json& j) {
  const auto text = [&](const char* member) -> std::optional<std::string> {
    if (!j.is_object() || !j.contains(member) || !j[member].is_string()) return std::nullopt;
    return j[member].get<std::string>();
  };
  const auto number = [&](const char* member) -> std::optional<int64_t> {
    if (!j.is_object() || !j.contains(member) || !j[member].is_number_integer()) {
      return std::nullopt;
    }
    if (j[member].is_number_unsigned() &&
        j[member].get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return j[member].get<int64_t>();
  };
  const auto kind = text("kind");
  if (kind == "kafka") {
    auto topic = text("topic");
    auto partition = number("partition");
    auto offset = number("offset");
    if (!topic || !partition || !offset || *partition < 0 ||
        *partition > std::numeric_limits<int32_t>::max()) {
      return fail(Error::bad_request(
          "Kafka coordinates need a string topic, an integer partition and an integer offset"));
    }
    return KafkaCoordinates{*topic, static_cast<int32_t>(*partition), *offset};
  }
  if (kind == "sqs") {
    auto queue = text("queue_url");
    auto id = text("message_id");
    if (!queue || !id) {
      return fail(Error::bad_request("SQS coordinates need a string queue_url and message_id"));
    }
    return SqsCoordinates{*queue, *id, ""};
  }
  return fail(Error::bad_request("coordinates need a kind of \"kafka\" or \"sqs\""));
}

std::vector<std::string> identity_components(const Coordinates& c) {
  if (const auto* k = std::get_if<KafkaCoordinates>(&c)) {
    return {"kafka", k->topic, std::to_string(k->partition), std::to_string(k->offset)};
  }
  const auto& s = std::get<SqsCoordinates>(c);
  return {"sqs", s.queue_url, s.message_id};
}

}  // namespace harvest::connector
