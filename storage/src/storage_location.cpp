#include <dcpp/storage/storage_location.h>

#include <algorithm>

namespace dcpp {

std::unique_ptr<StorageWriter> make_storage_writer(const std::string& location,
                                                   const FileSystemWriterOptions& layout,
                                                   const S3Options& s3) {
  if (is_s3_url(location)) {
    return std::make_unique<S3StorageWriter>(location, S3WriterOptions::from(layout, s3));
  }
  return std::make_unique<FileSystemWriter>(location, layout);
}

std::unique_ptr<StorageReader> make_storage_reader(const std::string& location,
                                                   const FileSystemReaderOptions& options,
                                                   const S3Options& s3) {
  if (is_s3_url(location)) {
    S3ReaderOptions reader;
    reader.s3 = s3;
    reader.thread_count = std::max(options.thread_count, reader.thread_count);
    reader.verify_checksums = options.verify_checksums;
    reader.max_decompressed_value_size = options.max_decompressed_value_size;
    return std::make_unique<S3StorageReader>(location, reader);
  }
  return std::make_unique<FileSystemReader>(location, options);
}

}  // namespace dcpp
