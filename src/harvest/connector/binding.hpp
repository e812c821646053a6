// What a broker message maps to (CON-2): a `SourceBinding` names the stream,
// the target workflow (a start, or a signal to an entity run), the mapping
// function and the delivery options.
//
//   auto binding = SourceBinding::starts("orders", "orders.placed", "fulfil_order")
//       .map_json([](const MessageCtx&, OrderPlaced order) -> MapResult {
//         return MappedMessage{"order-" + order.order_id, order};
//       })
//       .max_in_flight(32);
//
// Builders return `SourceBinding&`; a binding is validated once, when the
// plugin is built (CON-4).
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include <harvest/common/json.hpp>
#include <harvest/connector/message_ctx.hpp>
#include <harvest/engine/workflow.hpp>

namespace harvest::connector {

/// JSON value of a mapped payload or an entity start input (nlohmann::json).
using Json = nlohmann::json;

/// What a mapping function makes of one message: the workflow run it targets
/// and what it carries there. A plain value; the runtime moves it into the
/// start or the signal.
struct MappedMessage {
  /// The workflow id to start (starts) or to signal-with-start (signals_with_start).
  /// Must not be empty: an empty id counts as a mapping rejection.
  std::string workflow_id;
  /// The start input (starts) or the signal payload (signals_with_start).
  Json payload;
  /// signals_with_start: the input of the entity run this message starts, when
  /// it starts one; unset, the binding's entity_start_input (default {}).
  std::optional<Json> start_input = std::nullopt;
};

/// A mapping function's answer: the mapped message, or a rejection reason.
/// Rejections are strike-counted (CON-9).
using MapResult = std::expected<MappedMessage, std::string>;

/// Outcome of decoding + mapping one message: an undecodable body is a
/// deterministic poison (dead-lettered at once), a rejection is strike-counted.
struct MappingOutcome {
  /// How decoding and mapping ended.
  enum class Kind {
    kMapped,       ///< `mapped` holds the result, ready to dispatch.
    kUndecodable,  ///< The body did not decode: dead-lettered at once.
    kRejected      ///< The mapper refused it (or gave an empty workflow_id): strike-counted.
  };
  Kind kind;             ///< Which of the three outcomes this is.
  MappedMessage mapped;  ///< The mapped message; meaningful for kMapped only.
  std::string detail;    ///< Why it was undecodable or rejected; empty for kMapped.
};

/// The type-erased mapping step a binding runs on each message: decodes the
/// raw body and maps it. Built by SourceBinding::map_json / map_raw.
using Mapper = std::function<MappingOutcome(const MessageCtx&, std::string_view raw)>;

/// What a binding does with each mapped message.
enum class BindingKind {
  kStarts,           ///< Starts a run of the workflow (SourceBinding::starts).
  kSignalsWithStart  ///< Signals the entity run, starting it first if needed.
};

/// How redeliveries are deduplicated (CON-8).
enum class IdempotencyMode {
  kAuto,               ///< coordinates, or WorkflowId when the target defers admission
  kBrokerCoordinates,  ///< a `conn:` key derived from the message's coordinates
  kWorkflowId,         ///< the mapper's workflow_id (workflow-id dedupe)
};
/// The mode's stable name: "auto", "broker_coordinates" or "workflow_id".
[[nodiscard]] std::string_view to_string(IdempotencyMode mode);

/// What a binding does with a coordinate collision: a message whose dedupe
/// key (derived from its broker coordinates) is already held by a run or a
/// signal recorded from a different record — the position was reused, as on
/// a recreated topic or a new cluster (fingerprint.hpp). A collision is never
/// acknowledged as a duplicate.
enum class CollisionPolicy {
  /// Stop: the message is not acknowledged, nothing past it is committed,
  /// and the binding takes no new messages until it is restarted, reporting
  /// the collision (status, log, metric). The remedy is a new
  /// key_incarnation. The default.
  kHold,
  /// Dead-letter the message (reason `coordinate_collision`, raw payload
  /// kept) and go on; a replay after key_incarnation changes starts it.
  kDeadLetter,
  /// Start it anyway under a key derived from its fingerprint, logged and
  /// counted: for streams where a byte-identical collision is acceptable.
  kDispatch,
};
/// The policy's stable name: "hold", "dead_letter" or "dispatch".
[[nodiscard]] std::string_view to_string(CollisionPolicy policy);
/// The policy named `name` ("hold", "dead_letter", "dispatch"), or nullopt.
[[nodiscard]] std::optional<CollisionPolicy> collision_policy_named(std::string_view name);

/// Limits on a broker payload decoded by `map_json`: the documented depth;
/// size is already bounded by the broker (Kafka message.max.bytes, SQS 256 KiB).
inline constexpr JsonLimits kBrokerJsonLimits{.max_depth = 128, .max_bytes = size_t{64} << 20};

/// A declarative rule turning the messages of one stream into workflow starts
/// or entity signals. Lifecycle: created by starts() or signals_with_start(),
/// configured with the chained builders, then handed to the plugin (by value)
/// or the connector runtime, which validate it once when built (CON-4) and
/// never change it afterwards. Thread-safety: a plain value with no locking;
/// configure it on one thread, after which the getters may be read from any.
/// Ownership: owns its mapper, which owns (moves in) the callable it wraps.
class SourceBinding {
 public:
  /// Each message starts `workflow`.
  [[nodiscard]] static SourceBinding starts(std::string binding, std::string stream,
                                            std::string workflow);
  /// Each message is signal `signal` to the run of `workflow` named by the
  /// mapped workflow_id, starting it first if needed (the entity pattern).
  [[nodiscard]] static SourceBinding signals_with_start(std::string binding, std::string stream,
                                                        std::string workflow, std::string signal);

  /// Decodes the body as JSON into the mapper's second parameter type
  /// (`F: MapResult(const MessageCtx&, T)`); a body that does not decode, or
  /// nests deeper than kBrokerJsonLimits.max_depth (128), is undecodable
  /// (dead-lettered at once, with the reason).
  template <typename F>
  SourceBinding& map_json(F f) {
    using T = std::remove_cvref_t<typename detail_arg<F>::type>;
    mapper_ = [f = std::move(f)](const MessageCtx& ctx, std::string_view raw) -> MappingOutcome {
      T value;
      try {
        auto parsed = parse_json(raw, kBrokerJsonLimits);
        if (!parsed) return {MappingOutcome::Kind::kUndecodable, {}, parsed.error().message};
        value = parsed->template get<T>();
      } catch (const std::exception& e) {
        return {MappingOutcome::Kind::kUndecodable, {}, e.what()};
      }
      return from_result(f(ctx, std::move(value)));
    };
    return *this;
  }
  /// Maps the raw bytes (`F: MapResult(const MessageCtx&, std::string_view)`).
  template <typename F>
  SourceBinding& map_raw(F f) {
    mapper_ = [f = std::move(f)](const MessageCtx& ctx, std::string_view raw) -> MappingOutcome {
      return from_result(f(ctx, raw));
    };
    return *this;
  }

  /// Concurrent dispatches per binding. Default 16; 1 dispatches strictly in
  /// broker order; 0 is refused at build.
  SourceBinding& max_in_flight(size_t n) {
    max_in_flight_ = n;
    return *this;
  }
  /// Consecutive mapping rejections before a message is dead-lettered.
  /// Default 3; 0 never dead-letters by strikes.
  SourceBinding& poison_threshold(uint32_t n) {
    poison_threshold_ = n;
    return *this;
  }
  /// Hand poison back to the broker's own dead-letter machinery instead of the
  /// harvest table (needs a source with a dead-letter destination).
  SourceBinding& broker_native_dead_letter() {
    broker_native_dead_letter_ = true;
    return *this;
  }
  /// How redeliveries are deduplicated (CON-8). Default kAuto: broker
  /// coordinates, or the workflow id when the target workflow defers admission
  /// (throttle, debounce, batch). signals_with_start always dedupes on broker
  /// coordinates. The build refuses kWorkflowId on signals_with_start, and
  /// kBrokerCoordinates on a starts binding whose workflow defers admission.
  SourceBinding& idempotency_mode(IdempotencyMode mode) {
    idempotency_mode_ = mode;
    return *this;
  }
  /// signals_with_start: what a message for an entity whose run has ended
  /// does. Default kAllowAfterClose (a new run of the same workflow id starts
  /// and gets it); kReject refuses it (dead-lettered as start_rejected).
  SourceBinding& workflow_id_reuse(engine::WorkflowIdReuse reuse) {
    reuse_ = reuse;
    return *this;
  }
  /// signals_with_start: the input a new entity run starts with when the
  /// mapper gives none (MappedMessage::start_input). Default {}. The build
  /// refuses a binding whose workflow's input type rejects it, unless
  /// start_input_from_mapper() says every mapped message carries its own.
  SourceBinding& entity_start_input(Json input) {
    entity_start_input_ = std::move(input);
    return *this;
  }
  /// signals_with_start: declares that the mapper sets
  /// MappedMessage::start_input on every message, so the build does not check
  /// entity_start_input() against the workflow's input type.
  SourceBinding& start_input_from_mapper() {
    start_input_from_mapper_ = true;
    return *this;
  }
  /// Namespace rotation for cutovers (new cluster, recreated topic): part of
  /// every dedupe key, so a new value stops every earlier key from matching.
  /// The build refuses an empty value (leave it unset for the default
  /// namespace).
  SourceBinding& key_incarnation(std::string incarnation) {
    key_incarnation_ = std::move(incarnation);
    incarnation_set_ = true;
    return *this;
  }
  /// What a coordinate collision does (CollisionPolicy). Default kHold.
  SourceBinding& on_collision(CollisionPolicy policy) {
    collision_policy_ = policy;
    collision_policy_name_.clear();
    return *this;
  }
  /// The policy by name ("hold", "dead_letter", "dispatch"), as read from
  /// configuration; the build refuses any other name.
  SourceBinding& on_collision(std::string_view name) {
    if (auto p = collision_policy_named(name)) {
      collision_policy_ = *p;
      collision_policy_name_.clear();
    } else {
      collision_policy_name_ = std::string(name);
    }
    return *this;
  }
  /// Acknowledges a deliberate move of this binding (and key incarnation)
  /// to the Kafka cluster whose id is `cluster_id`: at start-up the cluster
  /// recorded for the binding is replaced by it instead of refusing to start
  /// (cluster_identity.hpp). Remove it once the cutover is done.
  SourceBinding& cluster_cutover(std::string cluster_id) {
    cluster_cutover_ = std::move(cluster_id);
    return *this;
  }

  /// The binding's name, as given to starts() / signals_with_start(): part of
  /// every dedupe key, and names the binding in dead letters, metrics and logs.
  [[nodiscard]] const std::string& name() const { return name_; }
  /// The stream consumed; must equal its source's EventSource::stream().
  [[nodiscard]] const std::string& stream() const { return stream_; }
  /// The target workflow's registered name.
  [[nodiscard]] const std::string& workflow() const { return workflow_; }
  /// The signal sent (signals_with_start); empty for starts.
  [[nodiscard]] const std::string& signal() const { return signal_; }
  /// Whether the binding starts runs or signals entities.
  [[nodiscard]] BindingKind kind() const { return kind_; }
  /// The mapping step; empty until map_json or map_raw (the build refuses that).
  [[nodiscard]] const Mapper& mapper() const { return mapper_; }
  /// The dispatch concurrency set by max_in_flight(size_t) (default 16).
  [[nodiscard]] size_t max_in_flight() const { return max_in_flight_; }
  /// The strike limit set by poison_threshold(uint32_t) (default 3; 0: none).
  [[nodiscard]] uint32_t poison_threshold() const { return poison_threshold_; }
  /// Whether poison goes to the broker's dead-letter target, not the harvest table.
  [[nodiscard]] bool uses_broker_native_dead_letter() const { return broker_native_dead_letter_; }
  /// The mode as set on the binding; the build resolves kAuto to the mode used.
  [[nodiscard]] IdempotencyMode requested_idempotency_mode() const { return idempotency_mode_; }
  /// The policy for a message whose entity run has ended (default kAllowAfterClose).
  [[nodiscard]] engine::WorkflowIdReuse workflow_id_reuse() const { return reuse_; }
  /// The key incarnation (default empty); part of every dedupe key, so
  /// changing it stops earlier keys from matching.
  [[nodiscard]] const std::string& incarnation() const { return key_incarnation_; }
  /// Whether key_incarnation() was called (an explicit empty value is refused).
  [[nodiscard]] bool incarnation_set() const { return incarnation_set_; }
  /// The coordinate-collision policy (default kHold).
  [[nodiscard]] CollisionPolicy collision_policy() const { return collision_policy_; }
  /// A policy name on_collision(std::string_view) did not know; empty if none.
  [[nodiscard]] const std::string& unknown_collision_policy() const {
    return collision_policy_name_;
  }
  /// The cluster id a deliberate cutover moves to (cluster_cutover); empty if none.
  [[nodiscard]] const std::string& cluster_cutover_id() const { return cluster_cutover_; }
  /// The input a new entity run starts with when the mapper gives none.
  [[nodiscard]] const Json& entity_start_input() const { return entity_start_input_; }
  /// Whether the mapper is declared to give every message its own start input.
  [[nodiscard]] bool start_input_from_mapper() const { return start_input_from_mapper_; }

 private:
  /// @cond INTERNAL
  template <typename F>
  struct detail_arg : detail_arg<decltype(&F::operator())> {};
  template <typename C, typename R, typename Ctx, typename A>
  struct detail_arg<R (C::*)(Ctx, A) const> {
    using type = A;
  };
  template <typename R, typename Ctx, typename A>
  struct detail_arg<R (*)(Ctx, A)> {
    using type = A;
  };
  /// @endcond
  static MappingOutcome from_result(MapResult r);

  SourceBinding(BindingKind kind, std::string name, std::string stream, std::string workflow,
                std::string signal);
  BindingKind kind_;
  std::string name_, stream_, workflow_, signal_;
  Mapper mapper_;
  size_t max_in_flight_ = 16;
  uint32_t poison_threshold_ = 3;
  bool broker_native_dead_letter_ = false;
  IdempotencyMode idempotency_mode_ = IdempotencyMode::kAuto;
  engine::WorkflowIdReuse reuse_ = engine::WorkflowIdReuse::kAllowAfterClose;
  std::string key_incarnation_;
  bool incarnation_set_ = false;
  CollisionPolicy collision_policy_ = CollisionPolicy::kHold;
  std::string collision_policy_name_;
  std::string cluster_cutover_;
  Json entity_start_input_ = Json::object();
  bool start_input_from_mapper_ = false;
};

}  // namespace harvest::connector
