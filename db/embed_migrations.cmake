# cmake -DOUT=file.cc -DDIR=db/migrations -P embed_migrations.cmake
# Writes the migration files into a C++ source, so the scheduler binary
# carries its schema and needs no files at run time.
set(body "// Generated from db/migrations by db/embed_migrations.cmake. Do not edit.\n")
string(APPEND body "#include \"db/migrations.h\"\n\nnamespace normsweep::db {\n\n")
string(APPEND body "const std::vector<Migration>& EmbeddedMigrations() {\n")
string(APPEND body "  static const std::vector<Migration>* migrations = new std::vector<Migration>{\n")
file(GLOB SOURCES ${DIR}/*.sql)
list(SORT SOURCES)
foreach(src ${SOURCES})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX MATCH "^[0-9]+" version ${name})
  math(EXPR version "${version} + 0")
  file(READ ${src} sql)
  string(APPEND body "      {${version}, \"${name}\", R\"normsweep_sql(${sql})normsweep_sql\"},\n")
endforeach()
string(APPEND body "  };\n  return *migrations;\n}\n\n}  // namespace normsweep::db\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
