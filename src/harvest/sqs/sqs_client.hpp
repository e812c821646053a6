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

/// Responses are parsed preserving member order, so message attributes keep
/// the order the service sent them in.
using SqsJson = nlohmann::ordered_json;

/// Where and how an SqsClient connects. Copied by the client at creation.
struct SqsClientConfig {
  /// Service endpoint, e.g. "http://127.0.0.1:19324". Default: resolved from
  /// the environment (AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL), else
  /// `https://sqs.<region>.amazonaws.com`.
  std::optional<std::string> endpoint;
  /// Signing region. Default: AWS_REGION, AWS_DEFAULT_REGION, the profile's
  /// region, else the region in an `sqs.<region>.amazonaws.com` endpoint.
  std::optional<std::string> region;
  /// Where signing keys come from. Default (null): a DefaultCredentialsChain.
  std::shared_ptr<CredentialsProvider> credentials;
  /// Longest wait for a connection to the endpoint. Default 3 s.
  std::chrono::milliseconds connect_timeout{3000};
  /// Total time allowed for a call that does not long-poll. Default 10 s.
  std::chrono::milliseconds request_timeout{10000};
  /// Added to WaitTimeSeconds for the total timeout of a long-polling
  /// ReceiveMessage, covering the round trip around the server's wait.
  /// Default 5 s.
  std::chrono::milliseconds long_poll_margin{5000};
};

/// One message attribute of an SQS message, as the service represents it.
struct SqsMessageAttribute {
  std::string name;  ///< the attribute's name
  /// "String", "Number", "Binary", or a custom "String.x" / "Number.x" type.
  std::string data_type;
  /// Set for String and Number types.
  std::optional<std::string> string_value;
  /// Base64 as sent on the wire, for Binary types.
  std::optional<std::string> binary_value;
};

/// One message as ReceiveMessage returned it.
struct SqsMessage {
  std::string message_id;  ///< the MessageId SQS assigned; never empty
  /// Names this receive of the message (to delete it or change its
  /// visibility); never empty.
  std::string receipt_handle;
  std::string body;  ///< the message body, as sent
  /// MD5 of the body as the service computed it (hex); may be empty.
  std::string md5_of_body;
  /// System attributes (ApproximateReceiveCount, SentTimestamp, ...), values
  /// as strings exactly as sent.
  std::map<std::string, std::string> attributes;
  /// Message attributes in the order the service sent them.
  std::vector<SqsMessageAttribute> message_attributes;
};

/// The arguments of one ReceiveMessage call.
struct ReceiveMessageRequest {
  std::string queue_url;  ///< the full URL of the queue to receive from
  /// Messages asked for, 1..10. Default 10.
  int max_messages = 10;
  /// Long-poll wait, in seconds, 0..20; 0 short-polls. Default 0.
  int wait_time_secs = 0;
  /// How long received messages stay invisible, in seconds; nullopt uses the
  /// queue's default.
  std::optional<int> visibility_timeout_secs;
};

/// A message to send. `id` is the batch entry id (SendMessageBatch only).
struct OutgoingMessage {
  std::string id;    ///< batch entry id, distinct within one batch; ignored by SendMessage
  std::string body;  ///< the message body
  std::vector<SqsMessageAttribute> message_attributes;  ///< sent when not empty
  std::optional<int> delay_secs;  ///< DelaySeconds, in seconds; nullopt: the queue's delay
  /// FIFO queues only.
  std::optional<std::string> message_group_id;
  /// FIFO queues only: the MessageDeduplicationId; not sent when nullopt
  /// (the queue must then deduplicate by content).
  std::optional<std::string> message_deduplication_id;
};

/// One entry a batch call failed.
struct BatchEntryFailure {
  std::string id;       ///< the failed entry's id, as given in the request
  std::string code;     ///< the service's error code for it
  std::string message;  ///< the service's explanation; may be empty
  /// true: the request was wrong for this entry (a stale receipt handle);
  /// false: the service failed it and a retry may succeed. true when the
  /// answer does not say.
  bool sender_fault = true;
};

/// The per-entry outcome of a batch call that succeeded as a whole.
struct BatchResult {
  /// Ids of the entries that succeeded.
  std::vector<std::string> successful;
  /// For SendMessageBatch: entry id -> MessageId of the successful entries.
  std::map<std::string, std::string> message_ids;
  /// The entries that failed.
  std::vector<BatchEntryFailure> failed;
};

/// One entry of a DeleteMessageBatch.
struct ReceiptEntry {
  std::string id;              ///< batch entry id, distinct within one batch
  std::string receipt_handle;  ///< the receive of the message to delete
};

/// One entry of a ChangeMessageVisibilityBatch.
struct VisibilityEntry {
  std::string id;              ///< batch entry id, distinct within one batch
  std::string receipt_handle;  ///< the receive of the message to change
  /// New visibility timeout, in seconds; 0 makes the message visible at
  /// once. Default 0.
  int visibility_timeout_secs = 0;
};

/// A signed client for one SQS endpoint and region (see the file comment).
/// Built only by `create()`; it keeps its configuration, credentials provider
/// (shared with whoever else holds it) and connection pool until it is
/// destroyed. Not copyable.
///
/// Thread-safe: calls may run concurrently from any thread; each takes its own
/// pooled libcurl handle, and sequential calls reuse open connections. Shared
/// (`shared_ptr`) between the SqsSource that consumes with it and whoever
/// built it. Every call has a connect timeout and a total timeout.
class SqsClient {
 public:
  /// Builds a client, resolving endpoint, region and credentials provider from
  /// `config` and the ambient AWS configuration. Contacts nothing; credentials
  /// are resolved on the first call. Errors: kConfig when no region can be
  /// determined or the endpoint is not an http(s) URL.
  [[nodiscard]] static Result<std::shared_ptr<SqsClient>> create(SqsClientConfig config = {});

  ~SqsClient();
  SqsClient(const SqsClient&) = delete;
  SqsClient& operator=(const SqsClient&) = delete;

  /// The resolved endpoint URL requests are sent to.
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
  /// The resolved region requests are signed for.
  [[nodiscard]] const std::string& region() const { return region_; }

  /// One signed JSON 1.0 call: `operation` is the bare name ("ListQueues").
  /// Returns the response body as JSON (an empty body as an empty object).
  /// `timeout` bounds the whole exchange (default: request_timeout).
  /// Errors: the credentials provider's; the transport's; a non-2xx answer
  /// translated by `sqs_error` (an expired token also invalidates the
  /// provider's credentials, so a retry re-resolves them); kInternal for a
  /// 2xx answer that is not JSON.
  [[nodiscard]] Result<SqsJson> call(std::string_view operation, const SqsJson& request,
                                     std::optional<std::chrono::milliseconds> timeout = {}) const;

  /// ReceiveMessage with all system and message attributes. The total timeout
  /// is the long-poll wait plus long_poll_margin. Returns the messages
  /// received, none when the queue had none; kInternal when a message lacks
  /// its MessageId or receipt handle.
  [[nodiscard]] Result<std::vector<SqsMessage>> receive_message(
      const ReceiveMessageRequest& request) const;

  /// DeleteMessage: deletes the message received as `receipt_handle`.
  [[nodiscard]] Status delete_message(std::string_view queue_url,
                                      std::string_view receipt_handle) const;
  /// DeleteMessageBatch. 1 to 10 entries (else kBadRequest, nothing sent). A
  /// 200 answer can still fail entries: see `failed`.
  [[nodiscard]] Result<BatchResult> delete_message_batch(
      std::string_view queue_url, const std::vector<ReceiptEntry>& entries) const;

  /// ChangeMessageVisibility: the message received as `receipt_handle`
  /// becomes visible again `visibility_timeout_secs` seconds from now (0: at
  /// once).
  [[nodiscard]] Status change_message_visibility(std::string_view queue_url,
                                                 std::string_view receipt_handle,
                                                 int visibility_timeout_secs) const;
  /// ChangeMessageVisibilityBatch. 1 to 10 entries (else kBadRequest, nothing
  /// sent); per-entry failures in `failed`.
  [[nodiscard]] Result<BatchResult> change_message_visibility_batch(
      std::string_view queue_url, const std::vector<VisibilityEntry>& entries) const;

  /// GetQueueAttributes: the named attributes ("All" for every one), values
  /// as strings. Absent attributes are absent from the map. `timeout` as for
  /// `call`.
  [[nodiscard]] Result<std::map<std::string, std::string>> get_queue_attributes(
      std::string_view queue_url, const std::vector<std::string>& names,
      std::optional<std::chrono::milliseconds> timeout = {}) const;

  /// SendMessage (`message.id` unused). Returns the new MessageId.
  [[nodiscard]] Result<std::string> send_message(std::string_view queue_url,
                                                 const OutgoingMessage& message) const;
  /// SendMessageBatch. 1 to 10 entries (else kBadRequest, nothing sent), each
  /// with a distinct `id`; BatchResult::message_ids maps them to MessageIds.
  [[nodiscard]] Result<BatchResult> send_message_batch(
      std::string_view queue_url, const std::vector<OutgoingMessage>& messages) const;

  /// CreateQueue `name` with `attributes` (none: the service's defaults).
  /// Returns the queue URL. Idempotent when the attributes match.
  [[nodiscard]] Result<std::string> create_queue(
      std::string_view name, const std::map<std::string, std::string>& attributes = {}) const;
  /// SetQueueAttributes: sets each of `attributes` on the queue.
  [[nodiscard]] Status set_queue_attributes(
      std::string_view queue_url, const std::map<std::string, std::string>& attributes) const;
  /// GetQueueUrl: the URL of the queue named `name`; kNotFound when there is
  /// none.
  [[nodiscard]] Result<std::string> get_queue_url(std::string_view name) const;
  /// DeleteQueue: deletes the queue and every message in it.
  [[nodiscard]] Status delete_queue(std::string_view queue_url) const;
  /// PurgeQueue: deletes every message in the queue, keeping the queue.
  [[nodiscard]] Status purge_queue(std::string_view queue_url) const;

 private:
  SqsClient(SqsClientConfig config, std::string endpoint, std::string region, std::string host,
            std::string path, std::shared_ptr<CredentialsProvider> credentials);

  SqsClientConfig config_;
  std::string endpoint_;
  std::string region_;
  std::string host_;  ///< Host header value
  std::string path_;  ///< request path, normally "/"
  std::shared_ptr<CredentialsProvider> credentials_;
  std::unique_ptr<HttpTransport> http_;
};

}  // namespace harvest::sqs
