# cmake -DOUT=file.cc -DDIR=db/views -P embed_views.cmake
# Writes the view files into a C++ source, as embed_migrations.cmake does the
# migrations: db/views/NN_name.sql becomes {"name", sql} of EmbeddedViews(),
# in the order of NN (two digits: the creation order, a view after the views
# it reads). Whole-line -- comments are left out, so that editing a comment
# changes no hash and re-creates no view.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST) in script mode
set(body "// Generated from db/views by db/embed_views.cmake. Do not edit.\n")
string(APPEND body "#include \"db/migrations.h\"\n\nnamespace normsweep::db {\n\n")
string(APPEND body "const std::vector<View>& EmbeddedViews() {\n")
string(APPEND body "  static const std::vector<View>* views = new std::vector<View>{\n")
file(GLOB SOURCES ${DIR}/*.sql)
list(SORT SOURCES)
set(orders "")
set(names "")
foreach(src ${SOURCES})
  get_filename_component(file ${src} NAME_WE)
  if(NOT file MATCHES "^([0-9][0-9])_([a-z][a-z0-9_]*)$")
    message(FATAL_ERROR "${src}: view files are named NN_view_name.sql (NN: two digits, the creation order)")
  endif()
  set(order ${CMAKE_MATCH_1})
  set(name ${CMAKE_MATCH_2})
  if(order IN_LIST orders)
    message(FATAL_ERROR "${src}: another file of ${DIR} has the number ${order}: the order must be explicit")
  endif()
  if(name IN_LIST names)
    message(FATAL_ERROR "${src}: another file of ${DIR} defines ${name}")
  endif()
  list(APPEND orders ${order})
  list(APPEND names ${name})
  file(READ ${src} sql)
  string(REGEX REPLACE "\n[ \t]*--[^\n]*" "" sql "\n${sql}")
  string(STRIP "${sql}" sql)
  string(APPEND body "      {\"${name}\", R\"normsweep_sql(${sql})normsweep_sql\"},\n")
endforeach()
string(APPEND body "  };\n  return *views;\n}\n\n}  // namespace normsweep::db\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
