// A small Amazon SQS client: the AWS JSON 1.0 protocol over libcurl.
//
// Every request is a signed (SigV4, service "sqs") `POST /` with
// `Content-Type: application/x-amz-json-1.0` and
// `X-Amz-Target: AmazonSQS.<Operation>`; SQS-compatible emulators (ElasticMQ,
// moto) speak the same protocol. Operations cover what SqsSource needs
// (receive, batch delete, visibility changes, queue attributes) plus the
// tooling used by tests and examples (send, create/delete/purge queues).
//
// Errors are values: an SQS error answer is translated by `sqs_error` (throttling,
// 5xx and transport failures are kTransient, QueueDoesNotExist is kNotFound,
// other 4xx are kBadRequest); a batch call that succeeds as a whole reports
// per-entry failures in its `BatchResult` instead.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <harvest/common/error.hpp>
#include <harvest/sqs/credentials.hpp>

namespace harvest::sqs {

class HttpTransport;

// Responses are parsed preserving member order, so message attributes keep
// the order the service sent them in.
using SqsJson = nlohmann::ordered_json;

struct SqsClientConfig {
  // Service endpoint, e.g. "http://127.0.0.1:19324". Default: resolved from
  // the environment (AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL), else
  // https://sqs.<region>.amazonaws.com.
  std::optional<std::string> endpoint;
  // Signing region. Default: AWS_REGION, AWS_DEFAULT_REGION, the profile's
  // region, else the region in an sqs.<region>.amazonaws.com endpoint.
  std::optional<std::string> region;
  // Where signing keys come from. Default (null): a DefaultCredentialsChain.
  std::shared_ptr<CredentialsProvider> credentials;
  // Longest wait for a connection to the endpoint. Default 3 s.
  std::chrono::milliseconds connect_timeout{3000};
  // Total time allowed for a call that does not long-poll. Default 10 s.
  std::chrono::milliseconds request_timeout{10000};
  // Added to WaitTimeSeconds for the total timeout of a long-polling
  // ReceiveMessage, covering the round trip around the server's wait.
  // Default 5 s.
  std::chrono::milliseconds long_poll_margin{5000};
};

struct SqsMessageAttribute {
  std::string name;
  // "String", "Number", "Binary", or a custom "String.x" / "Number.x" type.
  std::string data_type;
  // Set for String and Number types.
  std::optional<std::string> string_value;
  // Base64 as sent on the wire, for Binary types.
  std::optional<std::string> binary_value;
};

struct SqsMessage {
  std::string message_id;
  std::string receipt_handle;
  std::string body;
  std::string md5_of_body;
  // System attributes (ApproximateReceiveCount, SentTimestamp, ...), values
  // as strings exactly as sent.
  std::map<std::string, std::string> attributes;
  // Message attributes in the order the service sent them.
  std::vector<SqsMessageAttribute> message_attributes;
};

struct ReceiveMessageRequest {
  std::string queue_url;
  // 1..10.
  int max_messages = 10;
  // Long-poll wait, 0..20 s; 0 short-polls.
  int wait_time_secs = 0;
  // How long received messages stay invisible; nullopt uses the queue's
  // default.
  std::optional<int> visibility_timeout_secs;
};

// A message to send. `id` is the batch entry id (SendMessageBatch only).
struct OutgoingMessage {
  std::string id;
  std::string body;
  std::vector<SqsMessageAttribute> message_attributes;
  std::optional<int> delay_secs;
  // FIFO queues only.
  std::optional<std::string> message_group_id;
  std::optional<std::string> message_deduplication_id;
};

struct BatchEntryFailure {
  std::string id;
  std::string code;
  std::string message;
  // true: the request was wrong for this entry (a stale receipt handle);
  // false: the service failed it and a retry may succeed.
  bool sender_fault = true;
};

struct BatchResult {
  // Ids of the entries that succeeded.
  std::vector<std::string> successful;
  // For SendMessageBatch: entry id -> MessageId of the successful entries.
  std::map<std::string, std::string> message_ids;
  std::vector<BatchEntryFailure> failed;
};

struct ReceiptEntry {
  std::string id;
  std::string receipt_handle;
};

struct VisibilityEntry {
  std::string id;
  std::string receipt_handle;
  int visibility_timeout_secs = 0;
};

// Thread-safe: calls may run concurrently from any thread; each takes its own
// pooled libcurl handle, and sequential calls reuse open connections. Shared
// (`shared_ptr`) between the SqsSource that consumes with it and whoever
// built it. Every call has a connect timeout and a total timeout.
class SqsClient {
 public:
  // Builds a client, resolving endpoint, region and credentials provider from
  // `config` and the ambient AWS configuration. Contacts nothing; credentials
  // are resolved on the first call. Errors: kConfig when no region can be
  // determined or the endpoint is not an http(s) URL.
  [[nodiscard]] static Result<std::shared_ptr<SqsClient>> create(SqsClientConfig config = {});

  ~SqsClient();
  SqsClient(const SqsClient&) = delete;
  SqsClient& operator=(const SqsClient&) = delete;

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
  [[nodiscard]] const std::string& region() const { return region_; }

  // One signed JSON 1.0 call: `operation` is the bare name ("ListQueues").
  // Returns the response body as JSON (an empty body as an empty object).
  // `timeout` bounds the whole exchange (default: request_timeout).
  [[nodiscard]] Result<SqsJson> call(std::string_view operation, const SqsJson& request,
                                     std::optional<std::chrono::milliseconds> timeout = {}) const;

  // ReceiveMessage with all system and message attributes. The total timeout
  // is the long-poll wait plus long_poll_margin.
  [[nodiscard]] Result<std::vector<SqsMessage>> receive_message(
      const ReceiveMessageRequest& request) const;

  [[nodiscard]] Status delete_message(std::string_view queue_url,
                                      std::string_view receipt_handle) const;
  // At most 10 entries. A 200 answer can still fail entries: see `failed`.
  [[nodiscard]] Result<BatchResult> delete_message_batch(
      std::string_view queue_url, const std::vector<ReceiptEntry>& entries) const;

  [[nodiscard]] Status change_message_visibility(std::string_view queue_url,
                                                 std::string_view receipt_handle,
                                                 int visibility_timeout_secs) const;
  // At most 10 entries; per-entry failures in `failed`.
  [[nodiscard]] Result<BatchResult> change_message_visibility_batch(
      std::string_view queue_url, const std::vector<VisibilityEntry>& entries) const;

  // The named attributes ("All" for every one), values as strings. Absent
  // attributes are absent from the map.
  [[nodiscard]] Result<std::map<std::string, std::string>> get_queue_attributes(
      std::string_view queue_url, const std::vector<std::string>& names,
      std::optional<std::chrono::milliseconds> timeout = {}) const;

  // Returns the new MessageId.
  [[nodiscard]] Result<std::string> send_message(std::string_view queue_url,
                                                 const OutgoingMessage& message) const;
  // At most 10 entries, each with a distinct `id`.
  [[nodiscard]] Result<BatchResult> send_message_batch(
      std::string_view queue_url, const std::vector<OutgoingMessage>& messages) const;

  // Returns the queue URL. Idempotent when the attributes match.
  [[nodiscard]] Result<std::string> create_queue(
      std::string_view name, const std::map<std::string, std::string>& attributes = {}) const;
  [[nodiscard]] Status set_queue_attributes(
      std::string_view queue_url, const std::map<std::string, std::string>& attributes) const;
  [[nodiscard]] Result<std::string> get_queue_url(std::string_view name) const;
  [[nodiscard]] Status delete_queue(std::string_view queue_url) const;
  [[nodiscard]] Status purge_queue(std::string_view queue_url) const;

 private:
  SqsClient(SqsClientConfig config, std::string endpoint, std::string region, std::string host,
            std::string path, std::shared_ptr<CredentialsProvider> credentials);

  SqsClientConfig config_;
  std::string endpoint_;
  std::string region_;
  std::string host_;  // Host header value
  std::string path_;  // request path, normally "/"
  std::shared_ptr<CredentialsProvider> credentials_;
  std::unique_ptr<HttpTransport> http_;
};

}  // namespace harvest::sqs
