#include <fmt/format.h>

#include <algorithm>

#include <harvest/sqs/aws_config.hpp>
#include <harvest/sqs/http_transport.hpp>
#include <harvest/sqs/sigv4.hpp>
#include <harvest/sqs/sqs_client.hpp>
#include <harvest/sqs/sqs_error.hpp>

namespace harvest::sqs {
namespace {

constexpr size_t kMaxBatchEntries = 10;

// The region named by an AWS endpoint host ("sqs.eu-west-1.amazonaws.com").
std::optional<std::string> region_from_host(std::string_view host) {
  if (!host.starts_with("sqs.")) return std::nullopt;
  host.remove_prefix(4);
  auto dot = host.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  if (!host.substr(dot).starts_with(".amazonaws.com")) return std::nullopt;
  return std::string(host.substr(0, dot));
}

// The queue a request names, for error messages.
std::string target_of(const SqsJson& request) {
  for (const char* key : {"QueueUrl", "QueueName"}) {
    auto it = request.find(key);
    if (it != request.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

SqsJson attribute_json(const SqsMessageAttribute& a) {
  SqsJson j{{"DataType", a.data_type}};
  if (a.string_value) j["StringValue"] = *a.string_value;
  if (a.binary_value) j["BinaryValue"] = *a.binary_value;
  return j;
}

SqsJson outgoing_json(const OutgoingMessage& m) {
  SqsJson j{{"MessageBody", m.body}};
  if (!m.message_attributes.empty()) {
    SqsJson attrs = SqsJson::object();
    for (const auto& a : m.message_attributes) attrs[a.name] = attribute_json(a);
    j["MessageAttributes"] = std::move(attrs);
  }
  if (m.delay_secs) j["DelaySeconds"] = *m.delay_secs;
  if (m.message_group_id) j["MessageGroupId"] = *m.message_group_id;
  if (m.message_deduplication_id) j["MessageDeduplicationId"] = *m.message_deduplication_id;
  return j;
}

std::string string_or_empty(const SqsJson& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Emulators disagree on value types (ElasticMQ sends integers inside
// Attributes as strings, a RedrivePolicy's maxReceiveCount as a number), so
// scalar attribute values are normalised to their text.
std::string scalar_text(const SqsJson& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

Result<BatchResult> parse_batch_result(std::string_view operation, const SqsJson& response) {
  BatchResult out;
  if (auto it = response.find("Successful"); it != response.end() && it->is_array()) {
    for (const auto& e : *it) {
      std::string id = string_or_empty(e, "Id");
      if (auto mid = e.find("MessageId"); mid != e.end() && mid->is_string())
        out.message_ids[id] = mid->get<std::string>();
      out.successful.push_back(std::move(id));
    }
  }
  if (auto it = response.find("Failed"); it != response.end() && it->is_array()) {
    for (const auto& e : *it) {
      BatchEntryFailure f{.id = string_or_empty(e, "Id"),
                          .code = string_or_empty(e, "Code"),
                          .message = string_or_empty(e, "Message")};
      if (auto sf = e.find("SenderFault"); sf != e.end() && sf->is_boolean())
        f.sender_fault = sf->get<bool>();
      out.failed.push_back(std::move(f));
    }
  }
  if (!response.is_object())
    return fail(Error::internal(fmt::format("SQS {}: answer is not a JSON object", operation)));
  return out;
}

template <typename Entries>
Status check_batch_size(std::string_view operation, const Entries& entries) {
  if (entries.empty() || entries.size() > kMaxBatchEntries)
    return fail(Error::bad_request(fmt::format("SQS {}: {} entries; a batch holds 1 to {}",
                                               operation, entries.size(), kMaxBatchEntries)));
  return {};
}

}  // namespace

Result<std::shared_ptr<SqsClient>> SqsClient::create(SqsClientConfig config) {
  std::optional<std::string> region = config.region ? config.region : resolve_region();
  // The endpoint may need the region and the region may come from the
  // endpoint's host: resolve the explicit/environment endpoint first.
  std::optional<std::string> endpoint = config.endpoint;
  if (!endpoint) endpoint = env("AWS_ENDPOINT_URL_SQS");
  if (!endpoint) endpoint = env("AWS_ENDPOINT_URL");
  if (!region && endpoint) {
    if (auto url = parse_url(*endpoint)) region = region_from_host(url->host);
  }
  if (!region)
    return fail(Error::config(
        "SQS client: no AWS region; set AWS_REGION (or AWS_DEFAULT_REGION), a `region` in the "
        "AWS profile, or SqsClientConfig::region"));
  std::string resolved = resolve_sqs_endpoint(endpoint, *region);
  auto url = parse_url(resolved);
  if (!url) {
    Error e = url.error();
    e.message = "SQS client endpoint: " + e.message;
    return fail(std::move(e));
  }
  auto credentials =
      config.credentials ? config.credentials : std::make_shared<DefaultCredentialsChain>();
  return std::shared_ptr<SqsClient>(new SqsClient(std::move(config), std::move(resolved),
                                                  std::move(*region), url->authority(), url->path,
                                                  std::move(credentials)));
}

SqsClient::SqsClient(SqsClientConfig config, std::string endpoint, std::string region,
                     std::string host, std::string path,
                     std::shared_ptr<CredentialsProvider> credentials)
    : config_(std::move(config)),
      endpoint_(std::move(endpoint)),
      region_(std::move(region)),
      host_(std::move(host)),
      path_(std::move(path)),
      credentials_(std::move(credentials)),
      http_(std::make_unique<HttpTransport>()) {}

SqsClient::~SqsClient() = default;

Result<SqsJson> SqsClient::call(std::string_view operation, const SqsJson& request,
                                std::optional<std::chrono::milliseconds> timeout) const {
  auto credentials = credentials_->credentials();
  if (!credentials) {
    Error e = credentials.error();
    e.message = fmt::format("SQS {}: {}", operation, e.message);
    return fail(std::move(e));
  }
  const std::string body = request.dump();
  SigV4Request to_sign{.method = "POST",
                       .host = host_,
                       .path = path_,
                       .headers = {{"Content-Type", "application/x-amz-json-1.0"},
                                   {"X-Amz-Target", fmt::format("AmazonSQS.{}", operation)}},
                       .payload = body};
  SigV4Signature signature =
      sign_v4(to_sign, *credentials, region_, "sqs", std::chrono::system_clock::now());
  HttpRequest http_request{.method = "POST",
                           .url = endpoint_,
                           .headers = std::move(signature.headers),
                           .body = body,
                           .connect_timeout = config_.connect_timeout,
                           .timeout = timeout.value_or(config_.request_timeout)};
  auto response = http_->perform(http_request);
  if (!response) {
    Error e = response.error();
    e.message = fmt::format("SQS {}{}{}: {}", operation, target_of(request).empty() ? "" : " on ",
                            target_of(request), e.message);
    return fail(std::move(e));
  }
  if (response->status < 200 || response->status >= 300) {
    const std::string query_error = response->header("x-amzn-query-error");
    // Expired temporary credentials: drop them so the retry (the error is
    // transient) signs with re-resolved ones.
    auto code = parse_sqs_error(response->body, query_error).code;
    if (code == "ExpiredToken" || code == "ExpiredTokenException") credentials_->invalidate();
    return fail(
        sqs_error(operation, target_of(request), response->status, response->body, query_error));
  }
  // DeleteMessage, ChangeMessageVisibility and friends answer 200 with an
  // empty body (ElasticMQ) or "{}" (AWS).
  if (response->body.empty()) return SqsJson::object();
  SqsJson parsed = SqsJson::parse(response->body, nullptr, false);
  if (parsed.is_discarded())
    return fail(Error::internal(fmt::format("SQS {}: HTTP {} answer is not JSON: {}", operation,
                                            response->status, response->body.substr(0, 200))));
  return parsed;
}

Result<std::vector<SqsMessage>> SqsClient::receive_message(
    const ReceiveMessageRequest& request) const {
  SqsJson body{{"QueueUrl", request.queue_url},
               {"MaxNumberOfMessages", request.max_messages},
               {"WaitTimeSeconds", request.wait_time_secs},
               // Both spellings: newer servers read MessageSystemAttributeNames,
               // older ones (and older emulators) AttributeNames.
               {"MessageSystemAttributeNames", {"All"}},
               {"AttributeNames", {"All"}},
               {"MessageAttributeNames", {"All"}}};
  if (request.visibility_timeout_secs) body["VisibilityTimeout"] = *request.visibility_timeout_secs;
  auto timeout =
      std::chrono::seconds(std::max(0, request.wait_time_secs)) + config_.long_poll_margin;
  auto response =
      call("ReceiveMessage", body, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  if (!response) return fail(response.error());

  std::vector<SqsMessage> out;
  // moto answers an empty receive with "{}" rather than "Messages": [].
  auto messages = response->find("Messages");
  if (messages == response->end() || !messages->is_array()) return out;
  out.reserve(messages->size());
  for (const auto& m : *messages) {
    SqsMessage msg{.message_id = string_or_empty(m, "MessageId"),
                   .receipt_handle = string_or_empty(m, "ReceiptHandle"),
                   .body = string_or_empty(m, "Body"),
                   .md5_of_body = string_or_empty(m, "MD5OfBody")};
    if (auto attrs = m.find("Attributes"); attrs != m.end() && attrs->is_object()) {
      for (const auto& [k, v] : attrs->items()) msg.attributes[k] = scalar_text(v);
    }
    if (auto attrs = m.find("MessageAttributes"); attrs != m.end() && attrs->is_object()) {
      for (const auto& [k, v] : attrs->items()) {
        SqsMessageAttribute a{.name = k, .data_type = string_or_empty(v, "DataType")};
        if (auto s = v.find("StringValue"); s != v.end() && s->is_string())
          a.string_value = s->get<std::string>();
        if (auto b = v.find("BinaryValue"); b != v.end() && b->is_string())
          a.binary_value = b->get<std::string>();
        msg.message_attributes.push_back(std::move(a));
      }
    }
    if (msg.message_id.empty() || msg.receipt_handle.empty())
      return fail(Error::internal(
          fmt::format("SQS ReceiveMessage on {}: a message lacks MessageId or ReceiptHandle",
                      request.queue_url)));
    out.push_back(std::move(msg));
  }
  return out;
}

Status SqsClient::delete_message(std::string_view queue_url,
                                 std::string_view receipt_handle) const {
  auto r = call("DeleteMessage", {{"QueueUrl", queue_url}, {"ReceiptHandle", receipt_handle}});
  if (!r) return fail(r.error());
  return {};
}

Result<BatchResult> SqsClient::delete_message_batch(
    std::string_view queue_url, const std::vector<ReceiptEntry>& entries) const {
  if (auto ok = check_batch_size("DeleteMessageBatch", entries); !ok) return fail(ok.error());
  SqsJson list = SqsJson::array();
  for (const auto& e : entries) list.push_back({{"Id", e.id}, {"ReceiptHandle", e.receipt_handle}});
  auto r = call("DeleteMessageBatch", {{"QueueUrl", queue_url}, {"Entries", std::move(list)}});
  if (!r) return fail(r.error());
  return parse_batch_result("DeleteMessageBatch", *r);
}

Status SqsClient::change_message_visibility(std::string_view queue_url,
                                            std::string_view receipt_handle,
                                            int visibility_timeout_secs) const {
  auto r = call("ChangeMessageVisibility", {{"QueueUrl", queue_url},
                                            {"ReceiptHandle", receipt_handle},
                                            {"VisibilityTimeout", visibility_timeout_secs}});
  if (!r) return fail(r.error());
  return {};
}

Result<BatchResult> SqsClient::change_message_visibility_batch(
    std::string_view queue_url, const std::vector<VisibilityEntry>& entries) const {
  if (auto ok = check_batch_size("ChangeMessageVisibilityBatch", entries); !ok)
    return fail(ok.error());
  SqsJson list = SqsJson::array();
  for (const auto& e : entries)
    list.push_back({{"Id", e.id},
                    {"ReceiptHandle", e.receipt_handle},
                    {"VisibilityTimeout", e.visibility_timeout_secs}});
  auto r =
      call("ChangeMessageVisibilityBatch", {{"QueueUrl", queue_url}, {"Entries", std::move(list)}});
  if (!r) return fail(r.error());
  return parse_batch_result("ChangeMessageVisibilityBatch", *r);
}

Result<std::map<std::string, std::string>> SqsClient::get_queue_attributes(
    std::string_view queue_url, const std::vector<std::string>& names,
    std::optional<std::chrono::milliseconds> timeout) const {
  auto r =
      call("GetQueueAttributes", {{"QueueUrl", queue_url}, {"AttributeNames", names}}, timeout);
  if (!r) return fail(r.error());
  std::map<std::string, std::string> out;
  if (auto attrs = r->find("Attributes"); attrs != r->end() && attrs->is_object()) {
    for (const auto& [k, v] : attrs->items()) out[k] = scalar_text(v);
  }
  return out;
}

Result<std::string> SqsClient::send_message(std::string_view queue_url,
                                            const OutgoingMessage& message) const {
  SqsJson body = outgoing_json(message);
  body["QueueUrl"] = queue_url;
  auto r = call("SendMessage", body);
  if (!r) return fail(r.error());
  std::string id = string_or_empty(*r, "MessageId");
  if (id.empty())
    return fail(Error::internal(fmt::format("SQS SendMessage on {}: no MessageId", queue_url)));
  return id;
}

Result<BatchResult> SqsClient::send_message_batch(
    std::string_view queue_url, const std::vector<OutgoingMessage>& messages) const {
  if (auto ok = check_batch_size("SendMessageBatch", messages); !ok) return fail(ok.error());
  SqsJson list = SqsJson::array();
  for (const auto& m : messages) {
    SqsJson e = outgoing_json(m);
    e["Id"] = m.id;
    list.push_back(std::move(e));
  }
  auto r = call("SendMessageBatch", {{"QueueUrl", queue_url}, {"Entries", std::move(list)}});
  if (!r) return fail(r.error());
  return parse_batch_result("SendMessageBatch", *r);
}

Result<std::string> SqsClient::create_queue(
    std::string_view name, const std::map<std::string, std::string>& attributes) const {
  SqsJson body{{"QueueName", name}};
  if (!attributes.empty()) body["Attributes"] = attributes;
  auto r = call("CreateQueue", body);
  if (!r) return fail(r.error());
  std::string url = string_or_empty(*r, "QueueUrl");
  if (url.empty())
    return fail(Error::internal(fmt::format("SQS CreateQueue {}: no QueueUrl", name)));
  return url;
}

Status SqsClient::set_queue_attributes(std::string_view queue_url,
                                       const std::map<std::string, std::string>& attributes) const {
  auto r = call("SetQueueAttributes", {{"QueueUrl", queue_url}, {"Attributes", attributes}});
  if (!r) return fail(r.error());
  return {};
}

Result<std::string> SqsClient::get_queue_url(std::string_view name) const {
  auto r = call("GetQueueUrl", {{"QueueName", name}});
  if (!r) return fail(r.error());
  std::string url = string_or_empty(*r, "QueueUrl");
  if (url.empty())
    return fail(Error::internal(fmt::format("SQS GetQueueUrl {}: no QueueUrl", name)));
  return url;
}

Status SqsClient::delete_queue(std::string_view queue_url) const {
  auto r = call("DeleteQueue", {{"QueueUrl", queue_url}});
  if (!r) return fail(r.error());
  return {};
}

Status SqsClient::purge_queue(std::string_view queue_url) const {
  auto r = call("PurgeQueue", {{"QueueUrl", queue_url}});
  if (!r) return fail(r.error());
  return {};
}

}  // namespace harvest::sqs
