// ConnectorRuntime::Mapped: one message between the runtime's map phase and
// its commit phase. Internal to the connector module (runtime.cpp and
// runtime_replay.cpp), kept out of the installed runtime.hpp because it holds
// the dedupe key.
#pragma once

#include <optional>
#include <string>

#include <harvest/common/trace_context.hpp>
#include <harvest/connector/dedupe_key.hpp>
#include <harvest/connector/runtime.hpp>

namespace harvest::connector {

struct ConnectorRuntime::Mapped {
  std::optional<Dispatched> verdict;  ///< decided by mapping (poison, rejected)
  std::optional<DedupeKey> key;       ///< the dedupe key (CON-8)
  /// The record's fingerprint (fingerprint.hpp), stored with a coordinate key.
  std::optional<int64_t> fingerprint;
  MappedMessage message;
  std::string ref;                    ///< rendered coordinates, the start's source_ref
  std::optional<TraceContext> trace;  ///< the producer's, from the message's headers
  Clock::time_point started{};
};

}  // namespace harvest::connector
