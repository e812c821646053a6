#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include <harvest/common/log.hpp>
#include <harvest/sqs/sqs_source.hpp>

namespace harvest::sqs {
namespace {

using connector::Message;
using connector::SqsCoordinates;

constexpr size_t kBatch = 10;
constexpr int kMaxWaitSecs = 20;
constexpr int kMaxVisibilitySecs = 43200;

std::string queue_name_of(std::string_view url) {
  url = url.substr(0, url.find_first_of("?#"));
  while (url.ends_with('/')) url.remove_suffix(1);
  auto slash = url.rfind('/');
  return std::string(slash == std::string_view::npos ? url : url.substr(slash + 1));
}

// What a batch operation (delete / visibility) left undone: the failures are
// gathered over every chunk so one bad receipt handle does not keep the rest
// of the batch from being settled.
struct ChunkFailures {
  // "<MessageId> (<Code>: <message>)" per failed entry, or the bare MessageId
  // for each message of a chunk whose whole call failed.
  std::vector<std::string> entries;
  std::optional<Error> call_error;  // the first whole-call failure
  bool any_retryable_entry = false;

  [[nodiscard]] Status into_status(std::string_view operation, std::string_view queue,
                                   size_t total) const {
    if (entries.empty()) return {};
    std::string list;
    for (const auto& e : entries) list += (list.empty() ? "" : ", ") + e;
    std::string m = fmt::format("SQS {} on {} failed for {} of {} messages: {}", operation, queue,
                                entries.size(), total, list);
    if (call_error) m += "; " + call_error->message;
    // Anything that may pass on retry makes the whole result transient; a
    // failed call keeps its own kind (a deleted queue stays kNotFound); entry
    // failures that are the sender's fault (a stale receipt handle) are
    // permanent.
    ErrorKind kind = ErrorKind::kBadRequest;
    if ((call_error && should_retry(*call_error)) || any_retryable_entry)
      kind = ErrorKind::kTransient;
    else if (call_error)
      kind = call_error->kind;
    return fail(Error{kind, std::move(m)});
  }
};

}  // namespace

SqsSourceConfig::SqsSourceConfig(std::string queue_url) : queue_url_(std::move(queue_url)) {}

SqsSourceConfig& SqsSourceConfig::stream(std::string name) {
  stream_ = std::move(name);
  return *this;
}
SqsSourceConfig& SqsSourceConfig::visibility_timeout_secs(int secs) {
  visibility_timeout_secs_ = secs;
  return *this;
}
SqsSourceConfig& SqsSourceConfig::has_redrive_policy(bool yes) {
  has_redrive_policy_ = yes;
  return *this;
}
SqsSourceConfig& SqsSourceConfig::max_per_receive(int n) {
  max_per_receive_ = n;
  return *this;
}
SqsSourceConfig& SqsSourceConfig::receive_ahead(bool yes) {
  receive_ahead_ = yes;
  return *this;
}
SqsSourceConfig& SqsSourceConfig::endpoint(std::string url) {
  endpoint_ = std::move(url);
  return *this;
}
SqsSourceConfig& SqsSourceConfig::region(std::string region) {
  region_ = std::move(region);
  return *this;
}
SqsSourceConfig& SqsSourceConfig::credentials(std::shared_ptr<CredentialsProvider> provider) {
  credentials_ = std::move(provider);
  return *this;
}

std::string SqsSourceConfig::stream_name() const {
  return stream_ ? *stream_ : queue_name_of(queue_url_);
}

SqsClientConfig SqsSourceConfig::client_config() const {
  return SqsClientConfig{.endpoint = endpoint_, .region = region_, .credentials = credentials_};
}

Status SqsSourceConfig::validate() const {
  if (!queue_url_.starts_with("http://") && !queue_url_.starts_with("https://"))
    return fail(Error::config(fmt::format(
        "SqsSourceConfig: queue_url '{}' must be a full http(s) queue URL", queue_url_)));
  if (stream_name().empty())
    return fail(Error::config(fmt::format(
        "SqsSourceConfig: stream is empty (queue_url '{}' names no queue); set .stream(name)",
        queue_url_)));
  if (visibility_timeout_secs_ &&
      (*visibility_timeout_secs_ < 0 || *visibility_timeout_secs_ > kMaxVisibilitySecs))
    return fail(
        Error::config(fmt::format("SqsSourceConfig: visibility_timeout_secs {} is outside 0..{}",
                                  *visibility_timeout_secs_, kMaxVisibilitySecs)));
  if (max_per_receive_ < 1 || max_per_receive_ > static_cast<int>(kBatch))
    return fail(Error::config(fmt::format("SqsSourceConfig: max_per_receive {} is outside 1..{}",
                                          max_per_receive_, kBatch)));
  return {};
}

Result<std::shared_ptr<SqsSource>> SqsSource::connect(SqsSourceConfig config) {
  if (auto ok = config.validate(); !ok) return fail(ok.error());
  auto client = SqsClient::create(config.client_config());
  if (!client) return fail(client.error());

  std::optional<std::string> destination;
  std::optional<int> max_receives;
  const std::string& queue = config.queue_url();
  auto attrs = (*client)->get_queue_attributes(queue, {"RedrivePolicy"});
  if (!attrs && attrs.error().kind == ErrorKind::kConfig) {
    // An endpoint whose certificate is not trusted (a wrong CA bundle, an
    // expired certificate) does not heal by retrying: refuse to start.
    return fail(Error::config(fmt::format("SQS queue {}: {}", queue, attrs.error().message)));
  }
  if (!attrs) {
    // Fail closed: without a known redrive target, broker-native
    // dead-lettering would loop a poison message forever, so the build must
    // refuse it. The usual cause is an IAM policy without
    // sqs:GetQueueAttributes; the declaration is the escape hatch.
    log::warn(
        "SQS queue {}: probing its RedrivePolicy failed ({}); reporting no dead-letter "
        "destination{}",
        queue, attrs.error().describe(),
        config.declares_redrive_policy()
            ? ", but the config declares has_redrive_policy(true), so a redrive policy is assumed"
            : "; declare SqsSourceConfig::has_redrive_policy(true) if the queue has one");
    if (config.declares_redrive_policy())
      destination = fmt::format("redrive policy of {} (declared)", queue);
  } else if (auto it = attrs->find("RedrivePolicy"); it != attrs->end() && !it->second.empty()) {
    // RedrivePolicy is a JSON document inside a string attribute.
    auto policy = nlohmann::json::parse(it->second, nullptr, false);
    if (!policy.is_discarded() && policy.is_object() && policy.contains("deadLetterTargetArn") &&
        policy["deadLetterTargetArn"].is_string()) {
      destination = policy["deadLetterTargetArn"].get<std::string>();
      // maxReceiveCount is a number, or a number in a string (as the console
      // and CLI write it).
      if (const auto& n = policy.value("maxReceiveCount", nlohmann::json());
          n.is_number_integer()) {
        max_receives = n.get<int>();
      } else if (n.is_string()) {
        int parsed = 0;
        const auto& text = n.get_ref<const std::string&>();
        auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
        if (ec == std::errc() && ptr == text.data() + text.size() && parsed > 0) {
          max_receives = parsed;
        }
      }
    } else {
      log::warn("SQS queue {}: unreadable RedrivePolicy '{}'; reporting no dead-letter destination",
                queue, it->second);
    }
  } else if (config.declares_redrive_policy()) {
    // The probe is authoritative: a declared policy the queue does not have
    // would redeliver poison forever.
    log::warn(
        "SQS queue {}: the config declares has_redrive_policy(true) but the queue has no "
        "RedrivePolicy; reporting no dead-letter destination",
        queue);
  }
  auto source = std::shared_ptr<SqsSource>(
      new SqsSource(std::move(*client), std::move(config), std::move(destination)));
  source->redrive_max_receives_ = max_receives;
  return source;
}

SqsSource::SqsSource(std::shared_ptr<SqsClient> client, SqsSourceConfig config)
    : SqsSource(std::move(client), config,
                config.declares_redrive_policy()
                    ? std::optional<std::string>(
                          fmt::format("redrive policy of {} (declared)", config.queue_url()))
                    : std::nullopt) {}

SqsSource::SqsSource(std::shared_ptr<SqsClient> client, SqsSourceConfig config,
                     std::optional<std::string> dead_letter_destination)
    : client_(std::move(client)),
      config_(std::move(config)),
      stream_(config_.stream_name()),
      dead_letter_destination_(std::move(dead_letter_destination)) {
  if (!client_) throw ConfigError("SqsSource: the SqsClient must not be null");
  if (auto ok = config_.validate(); !ok) throw ConfigError(ok.error().message);
}

Message SqsSource::to_message(SqsMessage m) const {
  Message out;
  out.coordinates = SqsCoordinates{.queue_url = config_.queue_url(),
                                   .message_id = std::move(m.message_id),
                                   .receipt_handle = std::move(m.receipt_handle)};
  out.key = std::nullopt;
  out.payload = std::move(m.body);
  // String and Number attributes (and their custom subtypes) carry a
  // StringValue; Binary ones cannot be a text header and are left out.
  for (auto& a : m.message_attributes) {
    if (a.string_value) out.headers.emplace_back(std::move(a.name), std::move(*a.string_value));
  }
  out.receive_count = 1;
  if (auto it = m.attributes.find("ApproximateReceiveCount"); it != m.attributes.end()) {
    int n = 0;
    auto [ptr, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), n);
    if (ec == std::errc() && n > 0) out.receive_count = n;
  }
  return out;
}

SqsSource::~SqsSource() {
  if (!ahead_.valid()) return;
  auto unread = ahead_.get();
  if (!unread || unread->empty()) return;
  std::vector<Message> messages;
  for (auto& m : *unread) messages.push_back(to_message(std::move(m)));
  if (auto released = abandon(messages); !released) {
    log::warn(
        "SQS queue {}: releasing {} received-ahead messages: {}; they reappear after their "
        "visibility timeout",
        config_.queue_url(), messages.size(), released.error().describe());
  }
}

std::vector<Message> SqsSource::take_received_ahead() {
  std::vector<Message> out;
  if (!ahead_.valid()) return out;
  auto batch = ahead_.get();
  if (!batch) {
    log::warn("SQS queue {}: the receive-ahead call failed: {}", config_.queue_url(),
              batch.error().describe());
    return out;
  }
  for (auto& m : *batch) out.push_back(to_message(std::move(m)));
  return out;
}

Result<std::vector<SqsMessage>> SqsSource::receive_call(size_t want, int wait_secs) const {
  return client_->receive_message({.queue_url = config_.queue_url(),
                                   .max_messages = static_cast<int>(want),
                                   .wait_time_secs = wait_secs,
                                   .visibility_timeout_secs = config_.visibility_timeout()});
}

Result<std::vector<Message>> SqsSource::receive(size_t max, std::chrono::milliseconds timeout) {
  std::vector<Message> out;
  if (max == 0) return out;
  // Round the wait up: a 1.5 s poll_timeout must not become a 1 s wait, and
  // a sub-second one must still long-poll rather than bill a short poll.
  const auto wait_ms = std::max<int64_t>(0, timeout.count());
  int wait = static_cast<int>(std::min<int64_t>(kMaxWaitSecs, (wait_ms + 999) / 1000));
  const size_t per_call = static_cast<size_t>(config_.receive_batch());
  out.reserve(std::min(max, size_t{100}));
  bool more = false;  // the last call came back full
  if (ahead_.valid()) {
    // The call sent ahead asked for at most per_call messages; when `max` is
    // smaller the rest would have to be held, so it is only sent when the
    // runtime asks for at least that many (see below).
    auto batch = ahead_.get();
    if (batch) {
      more = batch->size() == per_call;
      for (auto& m : *batch) out.push_back(to_message(std::move(m)));
      if (!out.empty()) wait = 0;  // something to hand over: do not wait for more
    } else {
      log::warn("SQS queue {}: the receive-ahead call failed: {}", config_.queue_url(),
                batch.error().describe());
    }
  }
  const bool ahead_answered = !out.empty();
  while (out.size() < max && (!ahead_answered || more)) {
    const size_t want = std::min(per_call, max - out.size());
    auto batch = receive_call(want, wait);
    if (!batch) {
      if (out.empty()) return fail(batch.error());
      // The messages already received are invisible now; returning an error
      // would strand them until their visibility timeout. Hand them over and
      // let the next receive surface a persisting failure.
      log::warn("SQS queue {}: a follow-up ReceiveMessage failed after {} messages: {}",
                config_.queue_url(), out.size(), batch.error().describe());
      more = false;
      break;
    }
    const size_t got = batch->size();
    for (auto& m : *batch) out.push_back(to_message(std::move(m)));
    // A short answer means the queue has nothing more visible right now;
    // only the first call waits, so the batch is never held up by later ones.
    more = got == want;
    if (!more) break;
    wait = 0;
  }
  if (config_.receives_ahead() && more && max >= per_call) {
    // One second of long poll: an answer as soon as a message is visible,
    // and a bounded wait in the destructor.
    ahead_ = std::async(std::launch::async, [this, per_call] { return receive_call(per_call, 1); });
  }
  return out;
}

Status SqsSource::check_ours(std::string_view operation,
                             const std::vector<Message>& messages) const {
  for (const auto& m : messages) {
    const auto* c = std::get_if<SqsCoordinates>(&m.coordinates);
    if (!c || c->queue_url != config_.queue_url())
      return fail(Error::internal(
          fmt::format("SqsSource {}: {} was handed a message that this source did not receive",
                      config_.queue_url(), operation)));
  }
  return {};
}

template <typename Entry, typename Call>
Status SqsSource::settle(std::string_view operation, const std::vector<Message>& messages,
                         Entry make_entry, Call call) const {
  ChunkFailures failures;
  for (size_t start = 0; start < messages.size(); start += kBatch) {
    const size_t end = std::min(messages.size(), start + kBatch);
    auto message_id = [&](size_t i) -> const std::string& {
      return std::get<SqsCoordinates>(messages[i].coordinates).message_id;
    };
    std::vector<decltype(make_entry(std::string(), std::string()))> entries;
    for (size_t i = start; i < end; ++i) {
      // Entry ids are positions within the chunk: unique, and mapped back to
      // the MessageId when an entry fails.
      entries.push_back(
          make_entry(std::to_string(i - start),
                     std::get<SqsCoordinates>(messages[i].coordinates).receipt_handle));
    }
    auto result = call(entries);
    if (!result) {
      if (!failures.call_error) failures.call_error = result.error();
      for (size_t i = start; i < end; ++i) failures.entries.push_back(message_id(i));
      continue;
    }
    for (const auto& f : result->failed) {
      size_t index = start + std::strtoul(f.id.c_str(), nullptr, 10);
      std::string id = index < end ? message_id(index) : "entry " + f.id;
      failures.entries.push_back(fmt::format("{} ({}: {})", id, f.code, f.message));
      failures.any_retryable_entry |= !f.sender_fault;
    }
  }
  return failures.into_status(operation, config_.queue_url(), messages.size());
}

Status SqsSource::ack(const std::vector<Message>& messages) {
  if (auto ok = check_ours("ack", messages); !ok) return ok;
  return settle(
      "DeleteMessageBatch", messages,
      [](std::string id, std::string handle) {
        return ReceiptEntry{.id = std::move(id), .receipt_handle = std::move(handle)};
      },
      [&](const std::vector<ReceiptEntry>& entries) {
        return client_->delete_message_batch(config_.queue_url(), entries);
      });
}

Status SqsSource::abandon(const std::vector<Message>& messages) {
  if (auto ok = check_ours("abandon", messages); !ok) return ok;
  return settle(
      "ChangeMessageVisibilityBatch", messages,
      [](std::string id, std::string handle) {
        // Visibility 0: visible again at once, so SQS redelivers promptly and
        // counts the receive towards the redrive policy's maxReceiveCount.
        return VisibilityEntry{
            .id = std::move(id), .receipt_handle = std::move(handle), .visibility_timeout_secs = 0};
      },
      [&](const std::vector<VisibilityEntry>& entries) {
        return client_->change_message_visibility_batch(config_.queue_url(), entries);
      });
}

Result<std::optional<int64_t>> SqsSource::lag(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return std::optional<int64_t>{};
  auto attrs = client_->get_queue_attributes(
      config_.queue_url(), {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"},
      left);
  if (!attrs) {
    // Out of time is "cannot answer in time", not a failure of the queue.
    if (std::chrono::steady_clock::now() >= deadline) return std::optional<int64_t>{};
    return fail(attrs.error());
  }
  int64_t total = 0;
  for (const char* name :
       {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}) {
    auto it = attrs->find(name);
    int64_t n = 0;
    if (it == attrs->end() ||
        std::from_chars(it->second.data(), it->second.data() + it->second.size(), n).ec !=
            std::errc())
      return fail(Error::internal(
          fmt::format("SQS GetQueueAttributes on {}: no numeric {}", config_.queue_url(), name)));
    total += n;
  }
  return std::optional<int64_t>(total);
}

}  // namespace harvest::sqs
