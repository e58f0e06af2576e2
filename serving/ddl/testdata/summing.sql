CREATE DATABASE IF NOT EXISTS `marts`;

CREATE TABLE IF NOT EXISTS `marts`.`_goldbridge_sync`
(
    mart LowCardinality(String),
    partition String,
    gold_snapshot_id Int64,
    rows UInt64,
    checksum String,
    deleted UInt8,
    pushed_at DateTime64(6, 'UTC')
)
ENGINE = ReplacingMergeTree(pushed_at)
ORDER BY (mart, partition);

CREATE TABLE IF NOT EXISTS `marts`.`daily_revenue_kpi`
(
    `report_date` Date32,
    `grouping_level` LowCardinality(String),
    `country` Nullable(String),
    `category` Nullable(String),
    `grouping_country` UInt8,
    `grouping_category` UInt8,
    `revenue` SimpleAggregateFunction(sum, Nullable(Decimal(38, 2))),
    `orders` SimpleAggregateFunction(sum, Int64)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMMDD(`report_date`)
ORDER BY (`grouping_level`, `report_date`, `country`, `category`, `grouping_country`, `grouping_category`)
TTL toDate32(`report_date`) + toIntervalDay(120) DELETE
SETTINGS allow_nullable_key = 1, index_granularity = 16;

CREATE TABLE IF NOT EXISTS `marts`.`daily_revenue_kpi__staging`
(
    `report_date` Date32,
    `grouping_level` LowCardinality(String),
    `country` Nullable(String),
    `category` Nullable(String),
    `grouping_country` UInt8,
    `grouping_category` UInt8,
    `revenue` SimpleAggregateFunction(sum, Nullable(Decimal(38, 2))),
    `orders` SimpleAggregateFunction(sum, Int64)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMMDD(`report_date`)
ORDER BY (`grouping_level`, `report_date`, `country`, `category`, `grouping_country`, `grouping_category`)
SETTINGS allow_nullable_key = 1, index_granularity = 16;

CREATE OR REPLACE TABLE `marts`.`daily_revenue_kpi_final`
(
    `report_date` Date32,
    `country` Nullable(String),
    `category` Nullable(String),
    `grouping_country` UInt8,
    `grouping_category` UInt8,
    `grouping_level` LowCardinality(String),
    `revenue` Nullable(Decimal(38, 2)),
    `orders` Int64
)
ENGINE = Merge('marts', '^daily_revenue_kpi$');
