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
    `orders` SimpleAggregateFunction(sum, Int64),
    `customers__state` AggregateFunction(groupBitmap, UInt32),
    `avg_order__sum` SimpleAggregateFunction(sum, Decimal(38, 2)),
    `avg_order__count` SimpleAggregateFunction(sum, Int64),
    `max_order` SimpleAggregateFunction(max, Nullable(Decimal(38, 2))),
    `p_order__state` AggregateFunction(groupArray, Float64),
    `customers` SimpleAggregateFunction(any, Int64),
    `avg_order` SimpleAggregateFunction(any, Nullable(Decimal(38, 8))),
    `p_order` SimpleAggregateFunction(any, Array(Float64))
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
    `orders` SimpleAggregateFunction(sum, Int64),
    `customers__state` AggregateFunction(groupBitmap, UInt32),
    `avg_order__sum` SimpleAggregateFunction(sum, Decimal(38, 2)),
    `avg_order__count` SimpleAggregateFunction(sum, Int64),
    `max_order` SimpleAggregateFunction(max, Nullable(Decimal(38, 2))),
    `p_order__state` AggregateFunction(groupArray, Float64),
    `customers` SimpleAggregateFunction(any, Int64),
    `avg_order` SimpleAggregateFunction(any, Nullable(Decimal(38, 8))),
    `p_order` SimpleAggregateFunction(any, Array(Float64))
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMMDD(`report_date`)
ORDER BY (`grouping_level`, `report_date`, `country`, `category`, `grouping_country`, `grouping_category`)
SETTINGS allow_nullable_key = 1, index_granularity = 16;

CREATE TABLE IF NOT EXISTS `marts`.`daily_revenue_kpi__detail`
(
    `report_date` Date32,
    `grouping_level` LowCardinality(String),
    `country` Nullable(String),
    `category` Nullable(String),
    `grouping_country` UInt8,
    `grouping_category` UInt8,
    `revenue` Nullable(Decimal(38, 2)),
    `orders` Int64,
    `customers__keys` Array(String),
    `avg_order__sum` Decimal(38, 2),
    `avg_order__count` Int64,
    `max_order` Nullable(Decimal(38, 2)),
    `p_order__values` Array(Float64)
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(`report_date`)
ORDER BY tuple();

CREATE TABLE IF NOT EXISTS `marts`.`daily_revenue_kpi__ids`
(
    h UInt128,
    id UInt32
)
ENGINE = MergeTree
ORDER BY h;

INSERT INTO `marts`.`daily_revenue_kpi__ids` (h, id) SELECT reinterpretAsUInt128(generateUUIDv4()), 0 FROM system.one WHERE (SELECT count() FROM `marts`.`daily_revenue_kpi__ids` WHERE id = 0) = 0;

CREATE OR REPLACE TABLE `marts`.`daily_revenue_kpi_final`
(
    `report_date` Date32,
    `country` Nullable(String),
    `category` Nullable(String),
    `grouping_country` UInt8,
    `grouping_category` UInt8,
    `grouping_level` LowCardinality(String),
    `revenue` Nullable(Decimal(38, 2)),
    `orders` Int64,
    `customers` Int64,
    `avg_order` Nullable(Decimal(38, 8)),
    `max_order` Nullable(Decimal(38, 2)),
    `p_order` Array(Float64)
)
ENGINE = Merge('marts', '^daily_revenue_kpi$');

-- states of partition 20260501
INSERT INTO `marts`.`daily_revenue_kpi__staging` (`report_date`, `country`, `category`, `grouping_country`, `grouping_category`, `grouping_level`, `revenue`, `orders`, `customers__state`, `avg_order__sum`, `avg_order__count`, `max_order`, `p_order__state`, `customers`, `avg_order`, `p_order`)
SELECT `report_date`, `country`, `category`, `grouping_country`, `grouping_category`, `grouping_level`, `revenue`, `orders`, `customers__state`, `avg_order__sum`, `avg_order__count`, `max_order`, `p_order__state`, toInt64(finalizeAggregation(`customers__state`)) AS `customers`, if(`avg_order__count` = 0, NULL, toDecimal128(round(toDecimal128(`avg_order__sum`, 9) / `avg_order__count`, 8), 8)) AS `avg_order`, if(empty(finalizeAggregation(`p_order__state`)), CAST([], 'Array(Float64)'), arrayMap(p -> arraySort(finalizeAggregation(`p_order__state`))[greatest(1, toUInt64(ceil(p * length(finalizeAggregation(`p_order__state`)))))], [0.5, 0.9])) AS `p_order`
FROM (WITH (SELECT (groupArray(h), groupArray(id)) FROM `marts`.`daily_revenue_kpi__ids` WHERE h IN (SELECT reinterpretAsUInt128(sipHash128(arrayJoin(`customers__keys`))) FROM `marts`.`daily_revenue_kpi__detail` WHERE _partition_id = '20260501')) AS __gb_ids
SELECT
    `report_date`,
    `country`,
    `category`,
    toUInt8(grouping(`country`)) AS `grouping_country`,
    toUInt8(grouping(`category`)) AS `grouping_category`,
    multiIf(grouping(`country`) = 0 AND grouping(`category`) = 0, 'detail', grouping(`country`) = 1 AND grouping(`category`) = 1, 'total', concat('by_', arrayStringConcat(arrayFilter(x -> x != '', [if(grouping(`country`) = 0, 'country', ''), if(grouping(`category`) = 0, 'category', '')]), '_'))) AS `grouping_level`,
    sum(`revenue`) AS `revenue`,
    sum(`orders`) AS `orders`,
    CAST(groupBitmapArrayState(arrayMap(k -> transform(reinterpretAsUInt128(sipHash128(k)), __gb_ids.1, __gb_ids.2, toUInt32(0)), `customers__keys`)), 'AggregateFunction(groupBitmap, UInt32)') AS `customers__state`,
    sum(`avg_order__sum`) AS `avg_order__sum`,
    sum(`avg_order__count`) AS `avg_order__count`,
    max(`max_order`) AS `max_order`,
    CAST(groupArrayArrayState(`p_order__values`), 'AggregateFunction(groupArray, Float64)') AS `p_order__state`
FROM `marts`.`daily_revenue_kpi__detail`
WHERE _partition_id = '20260501'
GROUP BY GROUPING SETS ((`report_date`, `country`, `category`), (`report_date`, `country`), (`report_date`)))
SETTINGS group_by_use_nulls = 1;
