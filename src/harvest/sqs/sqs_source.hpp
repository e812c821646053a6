// SqsSource: the `EventSource` over one Amazon SQS queue (SQS-1, SQS-2).
//
//   auto source = SqsSource::connect(SqsSourceConfig(queue_url)
//                                        .stream("device-telemetry")
//                                        .visibility_timeout_secs(60));
//
// receive = ReceiveMessage long polls (up to 10 messages per call, several
// calls for a larger batch); ack = DeleteMessageBatch; abandon =
// ChangeMessageVisibilityBatch to 0, so SQS redelivers (and counts the
// receive, which is how a redrive policy moves poison to the DLQ); lag =
// ApproximateNumberOfMessages + ApproximateNumberOfMessagesNotVisible.
//
// Coordinates are SqsCoordinates{queue URL, MessageId, receipt handle}; the
// connector derives its dedupe key from queue URL + MessageId, never from a
// FIFO MessageDeduplicationId, which this source does not even read.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include <harvest/connector/event_source.hpp>
#include <harvest/sqs/sqs_client.hpp>

namespace harvest::sqs {

/// Where and how an SqsSource consumes. Builders return `*this`; the config is
/// validated once, by `SqsSource::connect` (an error) or the constructor (a
/// ConfigError), with messages naming the field.
class SqsSourceConfig {
 public:
  /// `queue_url`: the full queue URL, e.g.
  /// https://sqs.eu-west-1.amazonaws.com/123456789012/device-telemetry.
  explicit SqsSourceConfig(std::string queue_url);

  /// The logical stream name bindings refer to. Default: the queue name (the
  /// URL's last path segment).
  SqsSourceConfig& stream(std::string name);
  /// VisibilityTimeout sent with every ReceiveMessage, in seconds (0..43200).
  /// Default: unset, the queue's own setting applies. Size it above the worst
  /// dispatch latency, or SQS redelivers messages still in flight (safe, since
  /// redeliveries dedupe, but wasted work).
  SqsSourceConfig& visibility_timeout_secs(int secs);
  /// Declares that the queue has a redrive policy, so the source reports a
  /// dead-letter destination without probing (the constructor cannot probe;
  /// `connect` uses it only when its probe fails). Default false.
  SqsSourceConfig& has_redrive_policy(bool yes = true);
  /// Messages asked for per ReceiveMessage call, 1..10. Default 10.
  SqsSourceConfig& max_per_receive(int n);
  /// Receive-ahead: after a receive whose last call came back full (the queue
  /// has more), the next ReceiveMessage is sent in the background while the
  /// runtime dispatches, and the next receive() starts from its answer — the
  /// broker and the database are busy at once. At most one call ahead, so
  /// at most `max_per_receive` extra messages are in flight (invisible) at a
  /// time. The connector runtime takes them before it samples lag, pauses
  /// for a store outage or stops (dispatching them, or releasing them when
  /// the store is down), so a restart never spends a receive on a message it
  /// does not dispatch; a source destroyed with them unread releases them
  /// (visibility 0). Default true.
  SqsSourceConfig& receive_ahead(bool yes);
  /// Client settings used by `connect` (ignored by the constructor, which is
  /// given a client): explicit endpoint URL, signing region, credentials.
  /// Defaults: the ambient AWS configuration (see SqsClientConfig).
  /// Endpoint default: AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL, else
  /// `https://sqs.<region>.amazonaws.com`.
  SqsSourceConfig& endpoint(std::string url);
  /// Signing region. Default: AWS_REGION, AWS_DEFAULT_REGION, the profile's
  /// region, else the region in an `sqs.<region>.amazonaws.com` endpoint.
  SqsSourceConfig& region(std::string region);
  /// Where signing keys come from; shared and kept. Default (null): a
  /// DefaultCredentialsChain (environment, profile, web identity, container,
  /// EC2 instance metadata).
  SqsSourceConfig& credentials(std::shared_ptr<CredentialsProvider> provider);

  /// The queue URL as given; also the source's subscription identity.
  [[nodiscard]] const std::string& queue_url() const { return queue_url_; }
  /// The configured stream, or the queue name.
  [[nodiscard]] std::string stream_name() const;
  /// The VisibilityTimeout sent with each receive, in seconds; unset: the queue's.
  [[nodiscard]] std::optional<int> visibility_timeout() const { return visibility_timeout_secs_; }
  /// Whether has_redrive_policy() declared a redrive policy.
  [[nodiscard]] bool declares_redrive_policy() const { return has_redrive_policy_; }
  /// Messages asked for per ReceiveMessage call (max_per_receive()).
  [[nodiscard]] int receive_batch() const { return max_per_receive_; }
  /// Whether receive-ahead is on (receive_ahead()).
  [[nodiscard]] bool receives_ahead() const { return receive_ahead_; }
  /// The client configuration `connect` builds from.
  [[nodiscard]] SqsClientConfig client_config() const;

  /// Errors (kConfig) naming the offending field.
  [[nodiscard]] Status validate() const;

 private:
  std::string queue_url_;
  std::optional<std::string> stream_;
  std::optional<int> visibility_timeout_secs_;
  bool has_redrive_policy_ = false;
  int max_per_receive_ = 10;
  bool receive_ahead_ = true;
  std::optional<std::string> endpoint_;
  std::optional<std::string> region_;
  std::shared_ptr<CredentialsProvider> credentials_;
};

/// The EventSource over one SQS queue (see the file comment for the calls it
/// makes). Lifecycle: built by `connect` (or the constructor, given a client),
/// consumed by a connector runtime, and on destruction releases any messages
/// it received ahead. Thread-safety: as `EventSource` requires — receive/ack/abandon from the
/// runtime's consumer thread, `lag` concurrently from the lag sampler; the
/// only mutable state is the receive-ahead call, touched by receive() and the
/// destructor, and the client is thread-safe. Shared
/// (`shared_ptr`) between the application that builds it and the connector
/// runtime that consumes from it. The client is shared too and kept.
class SqsSource final : public connector::EventSource {
 public:
  /// Builds a client from `config` and the ambient AWS chain, then probes the
  /// queue's RedrivePolicy with GetQueueAttributes: its deadLetterTargetArn
  /// becomes the dead-letter destination. A failed probe (missing queue,
  /// access denied) is logged as a warning naming the queue and the error and
  /// counts as "no destination" (unless the config declares a redrive policy).
  /// Errors: kConfig for an invalid config, an unresolvable client, or an
  /// HTTPS endpoint whose certificate is not trusted (AWS_CA_BUNDLE names the
  /// CA certificates to trust instead of the system's).
  [[nodiscard]] static Result<std::shared_ptr<SqsSource>> connect(SqsSourceConfig config);

  /// Synchronous, contacts nothing: reports a dead-letter destination only
  /// when `config` declares `has_redrive_policy(true)`. Throws ConfigError for
  /// a null client or an invalid config.
  SqsSource(std::shared_ptr<SqsClient> client, SqsSourceConfig config);
  /// Waits for a receive-ahead call still under way and releases what it
  /// received (ChangeMessageVisibility 0), so nothing waits out its timeout.
  ~SqsSource() override;
  SqsSource(const SqsSource&) = delete;
  SqsSource& operator=(const SqsSource&) = delete;

  /// Long-polls for up to `max` messages: WaitTimeSeconds = ceil(timeout),
  /// capped at 20, on the first call only; further calls (10 messages each)
  /// do not wait and stop at the first short answer.
  [[nodiscard]] Result<std::vector<connector::Message>> receive(
      size_t max, std::chrono::milliseconds timeout) override;
  /// DeleteMessageBatch in chunks of 10; any failed entry is an error naming
  /// the MessageIds and codes (after every chunk has been tried).
  [[nodiscard]] Status ack(const std::vector<connector::Message>& messages) override;
  /// ChangeMessageVisibilityBatch to 0 in chunks of 10, same error rule.
  [[nodiscard]] Status abandon(const std::vector<connector::Message>& messages) override;
  [[nodiscard]] bool abandon_redelivers() const override { return true; }
  /// Whether a receive-ahead call was sent and not yet taken.
  [[nodiscard]] bool holds_received_ahead() const override { return ahead_.valid(); }
  /// Waits for the receive-ahead call (at most its 1 s long poll) and returns
  /// what it received; a failed call is logged and gives nothing.
  [[nodiscard]] std::vector<connector::Message> take_received_ahead() override;
  [[nodiscard]] std::optional<std::string> dead_letter_destination() const override {
    return dead_letter_destination_;
  }
  /// The RedrivePolicy's maxReceiveCount, as `connect` probed it; unknown for
  /// a source built by the constructor (a declared policy).
  [[nodiscard]] std::optional<int> redrive_max_receives() const override {
    return redrive_max_receives_;
  }
  /// ApproximateNumberOfMessages + ApproximateNumberOfMessagesNotVisible, the
  /// whole queue's owed work; std::nullopt once `deadline` has passed (the
  /// call's timeout is the time left).
  [[nodiscard]] Result<std::optional<int64_t>> lag(
      std::chrono::steady_clock::time_point deadline) override;
  /// The queue URL.
  [[nodiscard]] std::string subscription_identity() const override { return config_.queue_url(); }
  [[nodiscard]] std::string stream() const override { return stream_; }

  /// The client this source calls: the constructor's, or the one `connect` built.
  [[nodiscard]] const std::shared_ptr<SqsClient>& client() const { return client_; }

 private:
  SqsSource(std::shared_ptr<SqsClient> client, SqsSourceConfig config,
            std::optional<std::string> dead_letter_destination);

  /// One ReceiveMessage call of up to `want` messages.
  [[nodiscard]] Result<std::vector<SqsMessage>> receive_call(size_t want, int wait_secs) const;
  /// Converts one received SQS message.
  [[nodiscard]] connector::Message to_message(SqsMessage m) const;
  /// Refuses messages this source did not receive (other coordinates or queue).
  [[nodiscard]] Status check_ours(std::string_view operation,
                                  const std::vector<connector::Message>& messages) const;
  /// Runs a batch operation over `messages` in chunks of 10, trying every
  /// chunk, and folds entry and call failures into one Status.
  template <typename Entry, typename Call>
  [[nodiscard]] Status settle(std::string_view operation,
                              const std::vector<connector::Message>& messages, Entry make_entry,
                              Call call) const;

  std::shared_ptr<SqsClient> client_;
  SqsSourceConfig config_;
  std::string stream_;
  std::optional<std::string> dead_letter_destination_;
  std::optional<int> redrive_max_receives_;
  /// The receive-ahead call under way, if any (consumer thread only).
  std::future<Result<std::vector<SqsMessage>>> ahead_;
};

}  // namespace harvest::sqs
