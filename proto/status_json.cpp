#include "proto/status_json.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "proto/json_string.h"

namespace pronghorn {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

void append_fields(std::string& out, const Message& m, const std::string& prefix) {
  const auto* descriptor = m.GetDescriptor();
  const auto* reflection = m.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* f = descriptor->field(i);
    const std::string key = prefix + f->name();
    if (f->is_map()) {  // an object, keys sorted
      if (out.back() != '{') out += ", ";
      out += json_string(key);
      out += ": {";
      for (const auto& [name, value] : string_double_map(m, f)) {
        if (out.back() != '{') out += ", ";
        out += json_string(name);
        out += std::isfinite(value) ? fmt::format(": {}", value) : ": null";
      }
      out += "}";
      continue;
    }
    if (f->is_repeated()) {  // messages only (Status.ranks): an array of flat objects
      if (out.back() != '{') out += ", ";
      out += json_string(key);
      out += ": [";
      for (int k = 0; k < reflection->FieldSize(m, f); ++k) {
        out += k > 0 ? ", {" : "{";
        append_fields(out, reflection->GetRepeatedMessage(m, f, k), "");
        out += "}";
      }
      out += "]";
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      append_fields(out, reflection->GetMessage(m, f), key + "_");
      continue;
    }
    if (out.back() != '{') out += ", ";
    out += json_string(key);
    out += ": ";
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT64:
        out += fmt::format("{}", reflection->GetUInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        out += fmt::format("{}", reflection->GetUInt32(m, f));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        out += fmt::format("{}", reflection->GetInt64(m, f));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        out += fmt::format("{}", reflection->GetInt32(m, f));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        out += reflection->GetBool(m, f) ? "true" : "false";
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        const double v = reflection->GetDouble(m, f);
        out += std::isfinite(v) ? fmt::format("{}", v) : "null";  // JSON has no NaN
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        out += json_string(reflection->GetString(m, f));
        break;
      default:
        out += "null";
        break;  // no other types in Status
    }
  }
}

}  // namespace

std::map<std::string, double> string_double_map(const Message& m, const FieldDescriptor* f) {
  const FieldDescriptor* k = f->message_type()->map_key();
  const FieldDescriptor* v = f->message_type()->map_value();
  if (k->cpp_type() != FieldDescriptor::CPPTYPE_STRING ||
      v->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE) {
    throw std::logic_error("status field " + f->name() + " is not a map<string, double>");
  }
  std::map<std::string, double> sorted;
  const auto* reflection = m.GetReflection();
  for (int e = 0; e < reflection->FieldSize(m, f); ++e) {
    const Message& entry = reflection->GetRepeatedMessage(m, f, e);
    sorted[entry.GetReflection()->GetString(entry, k)] = entry.GetReflection()->GetDouble(entry, v);
  }
  return sorted;
}

std::string status_json(const v1::Status& status) {
  std::string out = "{";
  append_fields(out, status, "");
  return out + "}";
}

}  // namespace pronghorn
