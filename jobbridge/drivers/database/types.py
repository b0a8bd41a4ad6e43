"""Column types every jobbridge table shares, so MySQL and MariaDB get the large kinds everywhere."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Double, LargeBinary, Text
from sqlalchemy.dialects import mysql

# MySQL's BLOB and TEXT stop at 64 KiB: a large payload or a long traceback needs the bigger kinds.
BODY = LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")
ERROR_TEXT = Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
LONG_TEXT = Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
# Times are float epoch seconds from the driver's clock (see server_clock), bound as parameters.
TIME: Double[float] = Double(asdecimal=False)
MYSQL_TABLE: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
                               "mariadb_engine": "InnoDB", "mariadb_charset": "utf8mb4"}
