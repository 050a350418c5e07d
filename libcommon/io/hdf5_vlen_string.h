// Private to io/hdf5_*.cc: reads a variable-length string attribute from the file's bytes with bounded checks.
#pragma once
#include <hdf5.h>

#include <string>

namespace veomni::h5::detail {

// The value of the scalar variable-length string attribute `name` of `object`, read without HDF5's own
// variable-length reader: HDF5 1.10 (H5Aread -> H5HG_read) loops forever, overlaps memcpy ranges or allocates
// 2^62 bytes when the global heap collection that holds the string is damaged. Files written by veomni before
// strings became fixed-length hold such attributes, so they are read here: the attribute message is found in the
// object's (version 1) header, and the global heap collection it names is walked with every size checked against
// the collection and the file. Throws InputError naming `where` when anything does not fit, or when the attribute
// is stored in a form this reader does not check (version 2 object headers, dense attribute storage).
std::string read_vlen_string_attribute(hid_t object, const std::string& name, const std::string& where);

}  // namespace veomni::h5::detail
